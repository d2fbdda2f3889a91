"""Publishes to subjects used once: reply inboxes (PubAcks, answers to requests).

Theory of operation: a reply inbox gets one message (or a few) and is never
published to again, so caching its match or making a delivery plan for it
would only push useful entries out of both tables.  ``publish_once`` and
``publish_once_many`` (the server's own PubAcks) and ``_once`` (a client's
answer to a request seen, remembered by ``_note_reply``) match with
``Sublist.match_once`` (one shared result per inbox family) and, for one plain
local subscriber and no route interest, append the ``MSG`` to that client's
buffer in batch mode; anything else takes ``Router.publish``.  A mixin of
``node.router.Router``, over its state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from node.session import Subscription
    from node.sublist import Sublist

REPLIES_MAX = 4096
"""Reply subjects remembered for their answers (``_once``); cleared when full."""


class ReplyOnce:
    """Publishes to reply inboxes over the ``Router``'s state (see the module doc)."""

    if TYPE_CHECKING:
        sublist: Sublist[Any]
        route_sublist: Sublist[Any]
        out_msgs: int
        out_bytes: int
        _touched: set[Any]
        _replies: dict[bytes, None]

        def publish(
            self,
            src: Any,
            subject: bytes,
            reply: bytes | None,
            headers: bytes | None,
            payload: bytes,
        ) -> int: ...

    def publish_once(self, subject: bytes, payload: bytes) -> int:
        """Publish a header-less message on the server's behalf to a subject
        used once (a reply inbox: PubAcks).

        The subject's match is not cached and no delivery plan is made for
        it: they would never be used again and would only push useful
        entries out of both tables.  One plain local subscriber and no route
        interest (the usual inbox) gets the op appended in batch mode (the
        caller must ``flush()``); anything else takes ``publish``.  Returns
        the number of copies handed out.
        """
        self._replies.pop(subject, None)
        if self._once(None, subject, None, payload):
            return 1
        return self.publish(None, subject, None, None, payload)

    def publish_once_many(self, subjects: list[bytes], payloads: list[bytes]) -> None:
        """``publish_once`` of each ``(subject, payload)``, in order: a run of
        subjects of one inbox family (the same ``match_once`` result) costs one
        target check and one append to the client's buffer, in batch mode
        (the caller must ``flush()``).  In a cluster, one ``publish_once``
        each."""
        if self.route_sublist.count:
            for subject, payload in zip(subjects, payloads, strict=True):
                self.publish_once(subject, payload)
            return
        noted = self._replies
        sublist = self.sublist
        match_once = sublist.match_once
        families = sublist._families
        last: Any = None
        c: Any = None
        sub: Any = None
        parts: list[bytes] = []
        total = 0
        # the family (``prefix.``) of the target in hand: a subject of it (one
        # more token) matches alike while nothing is inserted or removed, which
        # nothing on this path does while a target is in hand
        fam = b"\x00"
        flen = 0
        for subject, payload in zip(subjects, payloads, strict=True):
            if noted:
                noted.pop(subject, None)
            if not (
                len(subject) > flen and subject.startswith(fam) and subject.find(b".", flen) < 0
            ):
                r = match_once(subject)
                if r is not last:
                    if parts:
                        self._once_append(c, sub, parts, total)
                        parts = []
                        total = 0
                    last = r
                    target = self._once_target(None, subject)
                    c, sub = (None, None) if target is None else target
                fam, flen = b"\x00", 0
                if c is not None:
                    prefix = subject.rpartition(b".")[0]
                    if families.get(prefix) is r:
                        fam = prefix + b"."
                        flen = len(fam)
            if c is None:
                self.publish(None, subject, None, None, payload)
                continue
            plen = len(payload)
            parts.append(b"MSG %b%b %d\r\n%b\r\n" % (subject, sub.sid_sp, plen, payload))
            total += plen
        if parts:
            self._once_append(c, sub, parts, total)

    def _once_append(self, c: Any, sub: Subscription, parts: list[bytes], total: int) -> None:
        """Append ``parts`` (MSG ops of ``total`` payload bytes for ``sub``) to
        ``c``'s buffer in batch mode, accounted as ``_once`` does each."""
        k = len(parts)
        c._out.append(b"".join(parts))
        c.out_msgs += k
        c.out_bytes += total
        sub.delivered += k
        self._touched.add(c)
        self.out_msgs += k
        self.out_bytes += total

    def _note_reply(self, reply: bytes) -> None:
        """Remember a reply subject a delivered request carried (bounded):
        a publish to it is an answer, taken by ``_once``."""
        replies = self._replies
        if len(replies) >= REPLIES_MAX:
            replies.clear()
        replies[reply] = None

    def _note_replies(self, replies: list[bytes | None]) -> None:
        """``_note_reply`` for each reply subject of a run (None: none), in one step."""
        noted = self._replies
        k = len(replies)
        if k > REPLIES_MAX:
            for r in replies:
                if r is not None:
                    self._note_reply(r)
            return
        if len(noted) + k > REPLIES_MAX:
            noted.clear()
        noted.update(dict.fromkeys(replies))  # type: ignore[arg-type]
        noted.pop(None, None)  # type: ignore[call-overload]

    def _once(self, src: Any, subject: bytes, reply: bytes | None, payload: bytes) -> bool:
        """Deliver a header-less message to a subject used once (a reply
        inbox) without caching its match or making a plan, when it has one
        plain local subscriber and no route interest (appended in batch
        mode); False (nothing done) for anything else."""
        target = self._once_target(src, subject)
        if target is None:
            return False
        c, sub = target
        plen = len(payload)
        if reply is None:
            c._out.append(b"MSG %b%b %d\r\n%b\r\n" % (subject, sub.sid_sp, plen, payload))
        else:
            c._out.append(b"MSG %b%b %b %d\r\n%b\r\n" % (subject, sub.sid_sp, reply, plen, payload))
            self._note_reply(reply)
        c.out_msgs += 1
        c.out_bytes += plen
        sub.delivered += 1
        self._touched.add(c)
        self.out_msgs += 1
        self.out_bytes += plen
        return True

    def _once_target(self, src: Any, subject: bytes) -> tuple[Any, Subscription] | None:
        """``(client, subscription)`` of the one plain local subscriber of a
        subject used once (a reply inbox), matched without caching; None when
        it has any other interest (see ``_once``)."""
        r = self.sublist.match_once(subject)
        psubs = r.psubs
        if len(psubs) != 1 or r.qsubs:
            return None
        if self.route_sublist.count:  # in a cluster: only this inbox's own route interest counts
            rr = self.route_sublist.match_once(subject)
            if rr.psubs or rr.qsubs:
                return None
        sub = psubs[0]
        c = sub.client
        if (
            c.internal
            or c.deliver_filter is not None
            or sub.max_msgs is not None
            or c.resp_perms is not None
            or (c is src and not src.echo)
        ):
            return None
        return c, sub
