"""``Router.publish_once`` (replies to one-off inboxes: PubAcks) and
``Router.defer``/``flush``: same bytes as ``publish``, nothing cached."""

from __future__ import annotations

import random

import trio

from node.replyonce import REPLIES_MAX
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


async def test_batched_wakes_each_buffer_once_for_the_whole_batch() -> None:
    """A committed batch's PubAcks (``Stream.answer_batch``): one wake-up (one write
    of a client session) per batch, not one per PubAck as each ``flush()`` gave."""
    router = _router()
    c = FakeClient()
    router.sublist.insert(Subscription(c, b"_INBOX.*", None, b"4"))
    wakes = 0
    flush_batch = c.flush_batch

    def counting() -> None:
        nonlocal wakes
        wakes += 1
        flush_batch()

    c.flush_batch = counting  # type: ignore[method-assign]

    def acks() -> None:
        for i in range(5):
            router.publish_once(b"_INBOX.%d" % i, b"ack")
            if not router.flushing:  # as the PubAck sender does
                router.flush()

    router.batched(acks)
    assert wakes == 1 and not router.flushing
    assert c.written().count(b"MSG _INBOX.") == 5
    acks()
    assert wakes == 6  # outside a batch: one per publish
    router.defer(lambda: router.batched(acks))  # nested in a flush: the flush wakes
    router.flush()
    assert wakes == 7
    await trio.lowlevel.checkpoint()


class _Capture:
    """An internal subscriber recording deliveries; may act on the router."""

    internal = True

    def __init__(self, on_msg: object = None) -> None:
        self.got: list[tuple[bytes, bytes | None, bytes, object]] = []
        self.on_msg = on_msg

    def deliver_internal(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        headers: bytes | None,
        payload: bytes,
        src: object = None,
    ) -> None:
        assert headers is None
        self.got.append((subject, reply, payload, src))
        if callable(self.on_msg):
            self.on_msg()

    def deliver_internal_run(
        self,
        sub: Subscription,
        subject: bytes,
        replies: list[bytes | None],
        payloads: list[bytes],
        src: object = None,
    ) -> bool:
        return False  # no run handler: one deliver_internal each


async def test_runs_to_internal_subscribers_skip_the_per_message_match() -> None:
    router = _router()
    cap = _Capture()
    router.sublist.insert(Subscription(cap, b"bench.>", None, b"i1"))
    pub_c = FakeClient()
    pub, pub_run, _ = router.fast_publisher(pub_c)
    pub_run(b"bench.js", [b"_INBOX.a.1", None], [b"x", b"yy"])
    pub(b"bench.js", b"_INBOX.a.2", b"z")
    router.flush()
    assert cap.got == [
        (b"bench.js", b"_INBOX.a.1", b"x", pub_c),
        (b"bench.js", None, b"yy", pub_c),
        (b"bench.js", b"_INBOX.a.2", b"z", pub_c),
    ]
    assert router.out_msgs == 3 and pub_c.in_msgs == 3
    matches = router.sublist.matches
    pub_run(b"bench.js", [None] * 3, [b"1", b"2", b"3"])
    assert router.sublist.matches == matches  # cached per generation


async def test_interest_change_during_an_internal_run_is_honoured() -> None:
    router = _router()
    late = FakeClient()
    late_sub = Subscription(late, b"cap", None, b"5")

    def subscribe_once() -> None:
        if len(cap.got) == 1:
            router.sublist.insert(late_sub)
            router.gen += 1

    cap = _Capture(subscribe_once)
    router.sublist.insert(Subscription(cap, b"cap", None, b"i1"))
    _, pub_run, _ = router.fast_publisher(FakeClient())
    pub_run(b"cap", [None, None], [b"a", b"b"])
    router.flush()
    assert [g[2] for g in cap.got] == [b"a", b"b"]
    assert late.written() == b"MSG cap 5 1\r\nb\r\n"  # subscribed after the first message


async def test_mixed_interest_and_acks_take_the_general_path() -> None:
    router = _router()
    cap = _Capture()
    c = FakeClient()
    router.sublist.insert(Subscription(cap, b"m.*", None, b"i1"))
    router.sublist.insert(Subscription(c, b"m.x", None, b"2"))
    assert router._internal_targets(b"m.x") is None  # a client listens too
    assert router._internal_targets(b"$JS.ACK.S.C.1.1.1.1.0") is None
    _, pub_run, _ = router.fast_publisher(FakeClient())
    pub_run(b"m.x", [None], [b"v"])
    router.flush()
    assert cap.got == [(b"m.x", None, b"v", cap.got[0][3])]
    assert c.written() == b"MSG m.x 2 1\r\nv\r\n"


async def test_answers_to_seen_requests_are_delivered_without_caching() -> None:
    router = _router()
    requester, responder = FakeClient(), FakeClient()
    router.sublist.insert(Subscription(requester, b"_INBOX.r.*", None, b"1"))
    router.sublist.insert(Subscription(responder, b"svc", None, b"2"))
    router.gen += 1
    req_pub, _, _ = router.fast_publisher(requester)
    rep_pub, _, _ = router.fast_publisher(responder)
    for i in range(3):
        req_pub(b"svc", b"_INBOX.r.%d" % i, b"q%d" % i)
        router.flush()
        assert responder.written() == b"MSG svc 2 _INBOX.r.%d 2\r\nq%d\r\n" % (i, i)
        rep_pub(b"_INBOX.r.%d" % i, None, b"a%d" % i)
        router.flush()
        assert requester.written() == b"MSG _INBOX.r.%d 1 2\r\na%d\r\n" % (i, i)
    cached = {r for r in router._plans} | set(router.sublist._cache)
    assert not any(s.startswith(b"_INBOX.") for s in cached)
    # a second answer to the same inbox (scatter/gather) takes the ordinary path
    rep_pub(b"_INBOX.r.2", None, b"again")
    router.flush()
    assert requester.written() == b"MSG _INBOX.r.2 1 5\r\nagain\r\n"
    assert requester.out_msgs == 4 and router.out_msgs == 7


async def test_publish_once_many_matches_publish_once_per_message() -> None:
    """A batch's PubAcks (``publish_once_many``): the same bytes and counts as
    ``publish_once`` of each, across inbox families, a subject nobody
    listens on, and one with two subscribers (the fallback), in order; one
    target check per family run (matches counted)."""
    subjects = [b"_INBOX.a.%d" % i for i in range(5)] + [b"nobody", b"_INBOX.b.1", b"r.x"]
    subjects += [b"_INBOX.a.9", b"_INBOX.a.5.6", b"_INBOX.a.", b"_INBOX.a.10"]
    bodies = [b'{"seq":%d}' % i for i in range(len(subjects))]
    got = []
    for many in (True, False):
        router = _router()
        a, b, q = FakeClient(), FakeClient(), FakeClient()
        router.sublist.insert(Subscription(a, b"_INBOX.a.*", None, b"1"))
        router.sublist.insert(Subscription(b, b"_INBOX.b.*", None, b"2"))
        router.sublist.insert(Subscription(a, b"r.*", None, b"3"))
        router.sublist.insert(Subscription(q, b"r.x", b"q", b"4"))
        router._note_reply(b"_INBOX.a.1")
        if many:
            router.publish_once_many(subjects, bodies)
        else:
            for s, p in zip(subjects, bodies, strict=True):
                router.publish_once(s, p)
        router.flush()
        got.append(
            (a.written(), b.written(), q.written(), a.out_msgs, a.out_bytes, router.out_msgs)
        )
        assert not router._replies
    assert got[0] == got[1]
    assert got[0][0].startswith(b'MSG _INBOX.a.0 1 9\r\n{"seq":0}\r\nMSG _INBOX.a.1 1 9\r\n')


async def test_runs_go_to_a_run_handler_in_one_call() -> None:
    """An internal subscriber with a ``run`` handler (a stream's capture) gets a
    publisher's run in one call; a single message still takes ``deliver_internal``."""
    from node.internal import InternalClient

    router = _router()

    class _Server:
        def add_sub(self, sub: Subscription, announce: bool = True) -> None:
            router.sublist.insert(sub)

    server = _Server()
    client = InternalClient(server, "t", account=object())  # type: ignore[arg-type]
    singles: list[tuple[bytes | None, bytes]] = []
    runs: list[tuple[bytes, list[bytes | None], list[bytes], object]] = []
    client.subscribe(
        b"bench.>",
        lambda sub, s, r, h, p: singles.append((r, p)),
        run=lambda sub, s, rs, ps: runs.append((s, list(rs), list(ps), client.sender)),
    )
    pub_c = FakeClient()
    pub, pub_run, _ = router.fast_publisher(pub_c)
    pub(b"bench.js", b"_INBOX.a.0", b"w")  # notes the internal targets
    pub_run(b"bench.js", [b"_INBOX.a.1", None], [b"x", b"yy"])
    pub(b"bench.js", b"_INBOX.a.2", b"z")
    assert singles == [(b"_INBOX.a.0", b"w"), (b"_INBOX.a.2", b"z")]
    assert runs == [(b"bench.js", [b"_INBOX.a.1", None], [b"x", b"yy"], pub_c)]
    assert client.in_msgs == 4 and router.out_msgs == 4 and client.sender is None


def test_reply_subjects_of_a_run_are_noted_within_the_bound() -> None:
    """A run of requests to one subject (``_run``) notes its reply subjects in
    one step (``_note_replies``), None skipped; the table stays within
    ``REPLIES_MAX``, also for a run longer than the bound."""
    router = _router()
    c = FakeClient()
    router.sublist.insert(Subscription(c, b"svc", None, b"1"))
    router.publish(None, b"svc", None, None, b"x")  # makes svc's plan
    replies: list[bytes | None] = [b"_INBOX.r.1", None, b"_INBOX.r.2"]
    router._run(None, b"svc", replies, [b"a", b"b", b"c"], True)
    assert list(router._replies) == [b"_INBOX.r.1", b"_INBOX.r.2"]
    for k in (REPLIES_MAX - 1, REPLIES_MAX + 5):
        many: list[bytes | None] = [b"_INBOX.m.%d" % i for i in range(k)]
        router._run(None, b"svc", many, [b"p"] * k, True)
        assert len(router._replies) <= REPLIES_MAX
        assert b"_INBOX.m.%d" % (k - 1) in router._replies
    router.flush()
