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

What differs from nats-server: a client subscribed to ``$JS.API.>`` on a
server that does not lead the consumer does not see ``MSG.NEXT`` requests
published on another server while the leader has its literal interest.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "LEADER_PREFIX",
    "MSG_NEXT_PREFIX",
    "leader_subject",
    "msg_next_subject",
    "to_consumer_leader",
]

CRLF = b"\r\n"
MSG_NEXT_PREFIX = b"$JS.API.CONSUMER.MSG.NEXT."
LEADER_PREFIX = b"$TRIJET.NEXT."


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
    when nobody holds the leader subject (route it as any other subject)."""
    leader = leader_subject(subject)
    if leader is None:
        return None
    if any(sub.subject == leader for sub in router.sublist.match(leader).psubs):
        return 0
    route = None
    for rs in router.route_sublist.match(leader).psubs:
        if rs.subject == leader:
            route = rs.route  # the last one to subscribe, if several
    if route is None:
        return None
    mid = b" " + reply + b" " if reply else b" "
    if headers is None:
        data = router._rmsg + leader + mid + str(len(payload)).encode() + CRLF + payload + CRLF
    else:
        hl = len(headers)
        sizes = str(hl).encode() + b" " + str(hl + len(payload)).encode()
        data = router._hmsg + leader + mid + sizes + CRLF + headers + payload + CRLF
    route.send(data)
    route.out_msgs += 1
    route.out_bytes += len(payload)
    return 1
