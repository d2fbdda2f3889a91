"""``Router.publish_once`` (replies to one-off inboxes: PubAcks) and
``Router.defer``/``flush``: same bytes as ``publish``, nothing cached."""

from __future__ import annotations

import random

import trio

from node.router import Router
from node.session import Subscription
from node.sublist import Sublist
from tests.node.test_router import FakeClient


def _router() -> Router:
    return Router(Sublist(), random.Random(1))


async def test_publish_once_matches_publish_and_caches_nothing() -> None:
    once, plain = _router(), _router()
    got = {}
    for router in (once, plain):
        c = FakeClient()
        router.sublist.insert(Subscription(c, b"_INBOX.abc.*", None, b"9"))
        for i in range(3):
            subject = b"_INBOX.abc.%d" % i
            body = b'{"stream":"S","seq":%d}' % i
            if router is once:
                assert router.publish_once(subject, body) == 1
            else:
                assert router.publish(None, subject, None, None, body) == 1
        router.flush()
        got[id(router)] = (c.written(), c.out_msgs, c.out_bytes)
    assert got[id(once)] == got[id(plain)]
    assert got[id(once)][0].startswith(b"MSG _INBOX.abc.0 9 22\r\n")
    assert once.sublist.cache_size() == 0 and not once._plans
    assert plain.sublist.cache_size() == 3  # what publish_once avoids
    assert once.out_msgs == plain.out_msgs == 3


async def test_publish_once_falls_back_for_anything_but_one_plain_subscriber() -> None:
    router = _router()
    a, b = FakeClient(), FakeClient()
    router.sublist.insert(Subscription(a, b"r.*", None, b"1"))
    router.sublist.insert(Subscription(b, b"r.x", b"q", b"2"))
    assert router.publish_once(b"r.x", b"hi") == 2  # plain + queue member
    router.flush()
    assert a.written() == b"MSG r.x 1 2\r\nhi\r\n"
    assert b.written() == b"MSG r.x 2 2\r\nhi\r\n"
    assert router.publish_once(b"nobody", b"x") == 0


async def test_deferred_work_runs_once_per_flush_before_buffers_wake() -> None:
    router = _router()
    c = FakeClient()
    router.sublist.insert(Subscription(c, b"inbox", None, b"3"))
    order: list[str] = []

    def work() -> None:
        order.append(f"work flushing={router.flushing}")
        router.publish_once(b"inbox", b"ack")
        router.flush()  # nested: the outer flush wakes the buffers

    router.defer(work)
    assert not c._wake.is_set()
    router.flush()
    assert order == ["work flushing=True"] and not router.flushing
    assert c._wake.is_set() and c.written() == b"MSG inbox 3 3\r\nack\r\n"
    router.flush()  # nothing deferred any more
    assert order == ["work flushing=True"]
    await trio.lowlevel.checkpoint()
