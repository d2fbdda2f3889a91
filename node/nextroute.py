"""Pull requests routed to the consumer's leader only (``MSG.NEXT`` in a cluster).

Theory of operation
-------------------
Every server of a cluster subscribes ``$JS.API.>`` (its JetStream API), so a
``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`` published on one server
would reach every other one, and all but the consumer's leader would read
and drop it.  nats-server instead has the consumer's leader alone subscribe
that subject.  trijet keeps the catch-all and adds a literal *leader
subject*: the server leading a pull consumer subscribes
``$TRIJET.NEXT.<stream>.<consumer>`` (``leader_subject``; the dispatcher's
``ConsumerManager.attach``/``detach``, so the interest moves with the lead).
When a client's ``MSG.NEXT`` is routed (``Router._to_routes``):

* the leader is this server (the literal subscription is local): it goes
  to no route -- the local catch-all answers it, or, when the lead was
  lost before the dispatcher heard of it, drops the leader subject and
  publishes it again (``JetStreamService._answer_or_forward``);
* one route has the literal interest: it goes to that route only, as an
  ``RMSG`` on the leader subject (same reply, headers, body);
* nobody has it (no pull consumer by that name, or a lead changing hands):
  as before, to every route with interest (each server's catch-all decides
  whether it answers; during an election the request is parked).

A new leader that takes a pull before its consumer is activated (the
lead is won before the leadership listeners run) holds it until the
dispatcher starts (``ConsumerManager.next_request``).  A server receiving
the leader subject (its catch-all ``$TRIJET.NEXT.>``,
subscribed on every server, so a request still in flight when the lead moved
on is never dropped by the router) answers it when it leads the consumer,
and otherwise publishes it again as the plain ``MSG.NEXT`` -- which now goes
to the new leader's literal interest, or to everyone.  A request is thus sent
either to one server or to all, never to two chosen ones, so it is never
taken twice; route connections are FIFO, so a server that gave up its
literal interest is not sent requests for it after its unsubscribe was read.

A pull sent to a leader's route is remembered here (``ForwardedPulls``,
per route, keyed by reply subject, forgotten when the request's own
``expires`` passes, bounded).  When that route closes -- the leader was
killed, or the link died -- nobody else holds those requests and the
leader, if alive, can no longer reach their replies: this server answers
each one still unexpired with ``409 Leadership Change``
(``Server.route_closed``), what a nats-server cluster tells the client once
the consumer has a new leader (observed: from the server the client is
connected to, 3-6 s after the SIGKILL, at the new leader's election; trijet
answers when the route drops).  A stepdown is answered by the old leader
itself (``ConsumerManager.detach``), whose route stays up.

Onlookers.  In a nats-server cluster a ``MSG.NEXT`` request is an ordinary
message: a client subscribed to ``$JS.API.>`` (or any subject matching the
request) on any server sees every one, wherever it was published.  trijet
keeps that without letting another server's JetStream catch-all act on the
request: a server with such a client subscription (``NextWatchers``, counted
in ``Server.add_sub``/``remove_sub``: any non-internal subscription whose
subject can match ``$JS.API.CONSUMER.MSG.NEXT.*.*``) subscribes
``$TRIJET.SEEN.>``, and the server routing a request to its leader also
sends ``$TRIJET.SEEN.<stream>.<consumer>`` to each other route with that
interest; the receiver hands it to its own subscribers as the plain
``MSG.NEXT``, with its JetStream service deaf to it
(``JetStreamService.deliver_seen``).  The leader does the same for the
leader-subject copy it receives.  With nobody watching, nothing more is
sent.  Queue subscriptions among the onlookers are not served by these
copies (every server would pick a member).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from typing import Any

__all__ = [
    "LEADERSHIP_CHANGE",
    "LEADER_PREFIX",
    "MSG_NEXT_PREFIX",
    "SEEN_PREFIX",
    "ForwardedPulls",
    "NextWatchers",
    "can_see_next",
    "leader_subject",
    "msg_next_subject",
    "to_consumer_leader",
]

CRLF = b"\r\n"
MSG_NEXT_PREFIX = b"$JS.API.CONSUMER.MSG.NEXT."
LEADER_PREFIX = b"$TRIJET.NEXT."
SEEN_PREFIX = b"$TRIJET.SEEN."
_NEXT_TOKENS = [*MSG_NEXT_PREFIX.rstrip(b".").split(b"."), b"*", b"*"]
#: what a pull hears when its consumer's leader is gone (nats-server's exact header block)
LEADERSHIP_CHANGE = b"NATS/1.0 409 Leadership Change\r\n\r\n"
#: requests remembered per route (the oldest are forgotten first)
FORWARDED_PER_ROUTE_MAX = 4096
#: how long a request without ``expires`` is remembered (it waits until served)
NO_EXPIRES_KEEP_S = 300.0


def can_see_next(subject: bytes) -> bool:
    """Whether a subscription on ``subject`` can match some
    ``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``."""
    tokens = subject.split(b".")
    for i, tok in enumerate(tokens):
        if tok == b">":
            return True
        if i >= len(_NEXT_TOKENS):
            return False
        want = _NEXT_TOKENS[i]
        if tok != b"*" and want != b"*" and tok != want:
            return False
    return len(tokens) == len(_NEXT_TOKENS)


class NextWatchers:
    """How many of an account's non-internal subscriptions on this server can
    see a ``MSG.NEXT`` (module doc); ``on_change(True/False)`` when the count
    leaves or reaches zero."""

    def __init__(self, on_change: Any) -> None:
        self.count = 0
        self.on_change = on_change

    def added(self, subject: bytes) -> None:
        if can_see_next(subject):
            self.count += 1
            if self.count == 1:
                self.on_change(True)

    def removed(self, subject: bytes) -> None:
        if can_see_next(subject) and self.count > 0:
            self.count -= 1
            if self.count == 0:
                self.on_change(False)


def _send_copy(
    route: Any,
    verb: bytes,
    subject: bytes,
    mid: bytes,
    headers: bytes | None,
    payload: bytes,
) -> None:
    if headers is None:
        data = verb + subject + mid + str(len(payload)).encode() + CRLF + payload + CRLF
    else:
        hl = len(headers)
        sizes = str(hl).encode() + b" " + str(hl + len(payload)).encode()
        data = verb + subject + mid + sizes + CRLF + headers + payload + CRLF
    route.send(data)
    route.out_msgs += 1
    route.out_bytes += len(payload)


def _to_onlookers(
    router: Any,
    rest: bytes,
    leader_route: Any,
    reply: bytes | None,
    headers: bytes | None,
    payload: bytes,
    mid: bytes,
) -> None:
    """``$TRIJET.SEEN.<rest>`` to each route but the leader's whose server has
    a subscriber that can see the request (module doc)."""
    seen = SEEN_PREFIX + rest
    psubs = router.route_sublist.match(seen).psubs
    if not psubs:
        return
    sent = {leader_route}
    for rs in psubs:
        route = rs.route
        if route not in sent:
            sent.add(route)
            verb = router._rmsg if headers is None else router._hmsg
            _send_copy(route, verb, seen, mid, headers, payload)


def pull_expiry(payload: bytes, now: float) -> float | None:
    """When a forwarded pull stops waiting (monotonic seconds; None: it does not
    wait -- ``no_wait`` without ``expires``, or a body the leader rejects)."""
    if not payload.strip():
        return now + NO_EXPIRES_KEEP_S  # one message, waits until served
    if payload[:1] != b"{":
        return now + NO_EXPIRES_KEEP_S  # a batch size
    try:
        doc = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    expires = doc.get("expires")
    if isinstance(expires, int) and expires > 0:
        return now + expires / 1e9
    if doc.get("no_wait"):
        return None
    return now + NO_EXPIRES_KEEP_S


class ForwardedPulls:
    """The pulls this server sent to a consumer leader's route, by route
    (module doc): reply subject -> when the request stops waiting.  A newer
    request on the same reply subject replaces the older (nats-py reuses one
    inbox per pull subscription, one fetch at a time)."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self.clock = clock
        self.by_route: dict[Any, OrderedDict[bytes, float]] = {}

    def note(self, route: Any, reply: bytes, payload: bytes) -> None:
        now = self.clock()
        until = pull_expiry(payload, now)
        waiting = self.by_route.get(route)
        if waiting is None:
            if until is None:
                return
            waiting = self.by_route[route] = OrderedDict()
        else:
            waiting.pop(reply, None)
        if until is not None:
            waiting[reply] = until
        # forget the oldest: expired (insertion order approximates expiry) or past the bound
        while waiting:
            first, first_until = next(iter(waiting.items()))
            if first_until > now and len(waiting) <= FORWARDED_PER_ROUTE_MAX:
                break
            del waiting[first]

    def route_lost(self, route: Any) -> list[bytes]:
        """Forget ``route``; the reply subjects of its requests still waiting."""
        waiting = self.by_route.pop(route, None)
        if not waiting:
            return []
        now = self.clock()
        return [reply for reply, until in waiting.items() if until > now]


def leader_subject(next_subject: bytes) -> bytes | None:
    """The leader subject of a ``MSG.NEXT`` subject (None: not ``<stream>.<consumer>``)."""
    rest = next_subject[len(MSG_NEXT_PREFIX) :]
    if rest.count(b".") != 1 or b"*" in rest or b">" in rest:
        return None
    return LEADER_PREFIX + rest


def msg_next_subject(leader: bytes) -> bytes:
    """The ``MSG.NEXT`` subject a leader subject stands for."""
    return MSG_NEXT_PREFIX + leader[len(LEADER_PREFIX) :]


def to_consumer_leader(
    router: Any, subject: bytes, reply: bytes | None, headers: bytes | None, payload: bytes
) -> int | None:
    """Route a client's ``MSG.NEXT`` to its consumer's leader only (module
    doc): 0 when the leader is this server, 1 when sent to its route; None
    when nobody holds the leader subject (route it as any other subject).
    Onlookers on other servers get their copies either way."""
    leader = leader_subject(subject)
    if leader is None:
        return None
    rest = leader[len(LEADER_PREFIX) :]
    mid = b" " + reply + b" " if reply else b" "
    if any(sub.subject == leader for sub in router.sublist.match(leader).psubs):
        _to_onlookers(router, rest, None, reply, headers, payload, mid)
        return 0
    route = None
    for rs in router.route_sublist.match(leader).psubs:
        if rs.subject == leader:
            route = rs.route  # the last one to subscribe, if several
    if route is None:
        return None
    verb = router._rmsg if headers is None else router._hmsg
    _send_copy(route, verb, leader, mid, headers, payload)
    if reply:
        router.forwarded.note(route, reply, payload)
    _to_onlookers(router, rest, route, reply, headers, payload, mid)
    return 1
