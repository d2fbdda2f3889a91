"""A client session's interest and permissions: SUB/UNSUB, publish and reply rights.

Theory of operation: ``SessionInterest`` is a mixin of ``node.session.ClientSession``
over its state.  A SUB is checked as nats-server does (a new sid's subject,
the subscribe permission with its queue, ``max_subscriptions``) and inserted
into the account's sublist through the server; an UNSUB with ``max_msgs``
above what was delivered sets the bound instead (the router's plans are
invalidated).  A publish is allowed by the publish permission or as the
answer to a request this client received (``allow_responses``: a reply
subject good for ``max_msgs`` answers until ``expires``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from node.protocol.events import Sub, Unsub
from node.protocol.wire import OK_BYTES, err_bytes
from node.subjects import valid_subject

if TYPE_CHECKING:
    from node.auth import Permissions
    from node.server import Server

log = logging.getLogger("node.session")


class Subscription:
    """One SUB of one client.  ``sid_sp`` is ``b" " + sid``, ready for MSG lines."""

    __slots__ = ("client", "delivered", "local", "max_msgs", "queue", "sid", "sid_sp", "subject")

    def __init__(self, client: Any, subject: bytes, queue: bytes | None, sid: bytes) -> None:
        self.client = client
        self.subject = subject
        self.queue = queue
        self.sid = sid
        self.sid_sp = b" " + sid
        self.max_msgs: int | None = None
        self.delivered = 0
        #: a server-local service's subscription: not announced to routes, and never
        #: handed a message that arrived on a route (internal clients only)
        self.local = False


class SessionInterest:
    """SUB/UNSUB and permissions over the ``ClientSession``'s state (see the module doc)."""

    if TYPE_CHECKING:
        cid: int
        server: Server
        account: Any
        subs: dict[bytes, Subscription]
        perms: Permissions | None
        resp_perms: Any
        verbose: bool
        deliver_filter: Any
        _replies: dict[bytes, list[float]]

        def _send_proto(self, data: bytes) -> None: ...

    def _on_sub(self, ev: Sub) -> None:
        subject = ev.subject
        # nats-server validates the subject when it inserts a new sid: a SUB
        # reusing an existing sid is a no-op whatever its subject
        if ev.sid not in self.subs and not valid_subject(subject):
            self._send_proto(err_bytes("Invalid Subject"))
            return
        if self.perms is not None and not self.perms.sub_allowed(subject, ev.queue):
            what = subject.decode(errors="replace")
            if ev.queue is not None:
                msg = f'Permissions Violation for Subscription to "{what}" using queue "{ev.queue.decode(errors="replace")}"'
            else:
                msg = f'Permissions Violation for Subscription to "{what}"'
            log.info("cid=%d event=sub_permission_violation subject=%s", self.cid, what)
            self._send_proto(err_bytes(msg))
            return
        mx = self.server.cfg.max_subscriptions
        if mx and len(self.subs) >= mx:
            self._send_proto(err_bytes("maximum subscriptions exceeded"))
            return
        if ev.sid not in self.subs:
            sub = Subscription(self, subject, ev.queue, ev.sid)
            self.subs[ev.sid] = sub
            self.server.add_sub(sub)
            if self.perms is not None and self.perms.wildcard_needs_filter(subject):
                self.deliver_filter = self.perms.deliver_allowed
        if self.verbose:
            self._send_proto(OK_BYTES)

    def _on_unsub(self, ev: Unsub) -> None:
        sub = self.subs.get(ev.sid)
        if sub is not None:
            if ev.max_msgs is None or ev.max_msgs <= sub.delivered:
                self.remove_sub(sub)
            else:
                sub.max_msgs = ev.max_msgs
                self.account.router.gen += 1
        if self.verbose:
            self._send_proto(OK_BYTES)

    def remove_sub(self, sub: Subscription) -> None:
        """Remove one of this client's subscriptions."""
        if self.subs.get(sub.sid) is sub:
            del self.subs[sub.sid]
            self.server.remove_sub(sub)

    # -- permissions ------------------------------------------------------

    def _pub_permitted(self, subject: bytes) -> bool:
        perms = self.perms
        assert perms is not None
        if perms.pub_allowed(subject) or self._reply_permitted(subject):
            return True
        what = subject.decode(errors="replace")
        log.info("cid=%d event=pub_permission_violation subject=%s", self.cid, what)
        self._send_proto(err_bytes(f'Permissions Violation for Publish to "{what}"'))
        return False

    def allow_reply(self, reply: bytes) -> None:
        """Remember a reply subject this client may answer (allow_responses)."""
        rp = self.resp_perms
        if rp is None:
            return
        expires = trio.current_time() + rp.expires_s if rp.expires_s else float("inf")
        self._replies[reply] = [float(rp.max_msgs), expires]

    def _reply_permitted(self, subject: bytes) -> bool:
        entry = self._replies.get(subject)
        if entry is None:
            return False
        if trio.current_time() > entry[1]:
            del self._replies[subject]
            return False
        entry[0] -= 1
        if entry[0] <= 0:
            del self._replies[subject]
        return True
