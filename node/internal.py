"""Server-internal clients: services that live inside the server (JetStream API, streams).

Theory of operation: an ``InternalClient`` owns subscriptions in the same
sublist as real clients, so routing, interest and no-responders treat it like
any subscriber.  The router hands it messages synchronously through
``deliver_internal`` while a session is processing a received chunk, so the
callback must not block or await: it records the message (typically into a
bounded queue its owner task drains) and returns.  ``publish`` sends a message
out through the router on the server's behalf (replies, advisories).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from node.session import Subscription

if TYPE_CHECKING:
    from node.server import Server

#: callback(subscription, subject, reply, headers, payload)
Handler = Callable[[Subscription, bytes, bytes | None, bytes | None, bytes], None]
#: callback(subscription, subjects, payload): several reply-less messages
#: without headers, one payload (a client's run of acks)
ManyHandler = Callable[[Subscription, list[bytes], bytes], None]
#: callback(subscription, subject, replies, payloads): several messages without
#: headers to one subject (a publisher's run); must not change interest
RunHandler = Callable[[Subscription, bytes, list[bytes | None], list[bytes]], None]


class InternalClient:
    """A subscriber and publisher inside the server.

    Args:
        server: the server whose sublist and router it uses.
        name: for logs and monitoring.
        account: the ``node.accounts.Account`` it lives in (None: the home account).
    """

    internal = True
    echo = True
    headers = True
    no_responders = False
    deliver_filter = None
    resp_perms = None
    closing = None

    def __init__(self, server: Server, name: str, account: Any = None) -> None:
        self.server = server
        self.name = name
        #: the account it subscribes and publishes in (default: the server's home
        #: account, JetStream's)
        self.account = account if account is not None else server.accounts.home
        self._local: set[Subscription] = set()  # subscriptions not announced to routes
        self.cid = 0
        self._handlers: dict[Subscription, Handler] = {}
        self._many: dict[Subscription, ManyHandler] = {}
        self._runs: dict[Subscription, RunHandler] = {}
        self._next_sid = 0
        self.in_msgs = 0
        self.out_msgs = 0
        #: the client session whose message a handler is being called with
        self.sender: Any = None

    def subscribe(
        self,
        subject: bytes,
        handler: Handler,
        queue: bytes | None = None,
        many: ManyHandler | None = None,
        *,
        announce: bool = True,
        run: RunHandler | None = None,
    ) -> Subscription:
        """Add an internal subscription (announced to routes like any other
        unless ``announce`` is False: then only this server's clients reach it);
        ``many``, when given, takes runs handed over by ``deliver_internal_many``,
        ``run`` those handed over by ``deliver_internal_run``."""
        self._next_sid += 1
        sub = Subscription(self, subject, queue, b"i%d" % self._next_sid)
        self._handlers[sub] = handler
        if many is not None:
            self._many[sub] = many
        if run is not None:
            self._runs[sub] = run
        if not announce:
            sub.local = True
            self._local.add(sub)
        self.server.add_sub(sub, announce=announce)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Remove a subscription made by ``subscribe``."""
        self._many.pop(sub, None)
        self._runs.pop(sub, None)
        if self._handlers.pop(sub, None) is not None:
            local = sub in self._local
            self._local.discard(sub)
            self.server.remove_sub(sub, announce=not local)

    def close(self) -> None:
        """Remove every subscription."""
        for sub in list(self._handlers):
            self.unsubscribe(sub)

    def deliver_internal(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        headers: bytes | None,
        payload: bytes,
        src: Any = None,
    ) -> None:
        """Called by the router; runs the subscription's handler (must not block).

        ``src`` is the publishing client session (None for the server itself
        or a route); the handler may read it as ``sender`` while it runs.
        """
        handler = self._handlers.get(sub)
        if handler is not None:
            self.in_msgs += 1
            outer, self.sender = self.sender, src
            try:
                handler(sub, subject, reply, headers, payload)
            finally:
                self.sender = outer

    def deliver_internal_run(
        self,
        sub: Subscription,
        subject: bytes,
        replies: list[bytes | None],
        payloads: list[bytes],
        src: Any = None,
    ) -> bool:
        """``deliver_internal`` for several messages without headers to one
        subject: one call of the subscription's ``run`` handler; False (nothing
        done) when it has none."""
        run = self._runs.get(sub)
        if run is None:
            return False
        self.in_msgs += len(payloads)
        outer, self.sender = self.sender, src
        try:
            run(sub, subject, replies, payloads)
        finally:
            self.sender = outer
        return True

    def deliver_internal_many(
        self, sub: Subscription, subjects: list[bytes], payload: bytes, src: Any = None
    ) -> None:
        """``deliver_internal`` for several reply-less messages without headers
        sharing ``payload``: one call of the subscription's ``many`` handler,
        else one ``deliver_internal`` each."""
        many = self._many.get(sub)
        if many is None:
            for subject in subjects:
                self.deliver_internal(sub, subject, None, None, payload, src)
            return
        self.in_msgs += len(subjects)
        outer, self.sender = self.sender, src
        try:
            many(sub, subjects, payload)
        finally:
            self.sender = outer

    def publish(
        self,
        subject: bytes,
        payload: bytes,
        *,
        reply: bytes | None = None,
        headers: bytes | None = None,
    ) -> int:
        """Publish on the server's behalf; returns the number of deliveries."""
        self.out_msgs += 1
        router = self.account.router
        n = router.publish(None, subject, reply, headers, payload)
        router.flush()  # the plan path appends in batch mode
        return n
