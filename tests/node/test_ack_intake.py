"""Router ack intake: ``$JS.ACK.<stream>.<consumer>.…`` publishes go straight to
the consumer's internal subscription only while nothing else could see them."""

from __future__ import annotations

import random
from typing import Any

from node.router import Router
from node.session import Subscription
from node.sublist import Sublist
from tests.node.test_router import FakeClient


class FakeInternal:
    """An internal client recording what the router hands it."""

    internal = True

    def __init__(self) -> None:
        self.got: list[tuple[bytes, bytes | None, bytes]] = []

    def deliver_internal(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        headers: bytes | None,
        payload: bytes,
        src: Any = None,
    ) -> None:
        self.got.append((subject, reply, payload))


ACK = b"$JS.ACK.S.C.1.5.5.1700000000000000000.0"


def _sub(client: Any, subject: bytes, queue: bytes | None = None) -> Subscription:
    return Subscription(client, subject, queue, b"1")


def _router() -> tuple[Router, FakeInternal, Subscription]:
    router = Router(Sublist(), random.Random(1))
    internal = FakeInternal()
    sub = _sub(internal, b"$JS.ACK.S.C.*.*.*.*.*")
    router.sublist.insert(sub)
    router.gen += 1
    return router, internal, sub


def test_overlapping_lists_interest_below_a_prefix() -> None:
    sl: Sublist[Subscription] = Sublist()
    c = FakeClient()
    inside = [
        _sub(c, b"$JS.ACK.S.C.>"),
        _sub(c, b"$JS.ACK.>"),
        _sub(c, b">"),
        _sub(c, b"*.ACK.x"),
        _sub(c, b"$JS.*.S.C.1.2.3.4.5"),
        _sub(c, b"$JS.ACK.S.C.1.2.3.4.5", b"q"),
    ]
    outside = [_sub(c, b"$JS.ACK"), _sub(c, b"$JS.API.>"), _sub(c, b"foo.>"), _sub(c, b"*")]
    for s in inside + outside:
        sl.insert(s)
    assert sorted(s.subject for s in sl.overlapping(b"$JS.ACK")) == sorted(
        s.subject for s in inside
    )


def test_acks_skip_the_sublist_while_only_the_consumer_listens() -> None:
    router, internal, _ = _router()
    pub = FakeClient()
    matches = router.sublist.matches
    for _ in range(3):
        assert router.publish(pub, ACK, None, None, b"+ACK") == 1
    assert internal.got == [(ACK, None, b"+ACK")] * 3
    assert router.sublist.matches == matches  # no match, no cached result
    assert router.sublist.cache_size() == 0


def test_acks_of_unknown_consumers_take_the_normal_path() -> None:
    router, internal, _ = _router()
    pub = FakeClient()
    other = b"$JS.ACK.S.D.1.5.5.1.0"
    assert router.publish(pub, other, None, None, b"") == 0
    assert router.publish(pub, b"$JS.ACK.S.C", None, None, b"") == 0
    assert internal.got == []


def test_a_client_listening_on_acks_sees_them_and_the_consumer_still_gets_them() -> None:
    router, internal, _ = _router()
    pub = FakeClient()
    spy = FakeClient()
    spy_sub = _sub(spy, b"$JS.ACK.>")
    router.sublist.insert(spy_sub)
    router.gen += 1
    assert router.publish(pub, ACK, None, None, b"+ACK") == 2
    router.flush()
    assert b"MSG " + ACK in spy.written()
    assert internal.got == [(ACK, None, b"+ACK")]
    router.sublist.remove(spy_sub)
    router.gen += 1
    matches = router.sublist.matches
    assert router.publish(pub, ACK, None, None, b"+NAK") == 1
    assert router.sublist.matches == matches
    assert internal.got[-1] == (ACK, None, b"+NAK")


def test_queue_interest_or_a_second_ack_subscription_disable_the_shortcut() -> None:
    for extra in (
        _sub(FakeInternal(), b"$JS.ACK.S.C.>", b"q"),
        _sub(FakeInternal(), b"$JS.ACK.S.C.>"),
        _sub(FakeInternal(), b"$JS.ACK.*.C.>"),
    ):
        router, internal, _ = _router()
        router.sublist.insert(extra)
        router.gen += 1
        matches = router.sublist.matches
        router.publish(FakeClient(), ACK, None, None, b"+ACK")
        assert router.sublist.matches == matches + 1, extra.subject
        assert internal.got == [(ACK, None, b"+ACK")]
        assert len(extra.client.got) == 1


def test_route_interest_in_acks_disables_the_shortcut() -> None:
    router, _internal, _ = _router()
    router.route_sublist.insert(_sub(FakeClient(), b"$JS.ACK.>"))
    router.gen += 1
    assert router._ack_table() == {}
    router.route_sublist = Sublist()
    router.gen += 1
    assert list(router._ack_table()) == [b"S.C"]


def test_ack_subjects_of_another_shape_take_the_normal_path() -> None:
    """Only nine non-empty tokens make an ack (nats-server's consumers listen on
    exactly that shape); others find no listener, alone or in a run."""
    router, internal, _ = _router()
    pub = FakeClient()
    odd = [
        b"$JS.ACK.S.C.1.5.5.1",
        b"$JS.ACK.S.C.1.5.5.1.0.0",
        b"$JS.ACK.S.C.1.5.5..0",
        b"$JS.ACK.S.C.1.5.5.1.",
    ]
    for subject in odd:
        assert router.publish(pub, subject, None, None, b"+ACK") == 0, subject
    assert internal.got == []
    assert router.sublist.matches == len(odd)
