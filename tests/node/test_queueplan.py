"""Queue plans (``node.queueplan``): runs to a subject with queue groups are
delivered per member with one join, each message to exactly one member of
each group and to every plain subscriber, in order, with the bytes
``publish`` would write; the match happens once, not per message."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from node.protocol.wire import msg_bytes
from node.router import Router
from node.session import Subscription
from node.sublist import Sublist
from tests.node.test_router import FakeClient

MSGS = st.lists(
    st.tuples(st.one_of(st.none(), st.just(b"R.1")), st.sampled_from([b"", b"a", b"abc"])),
    min_size=1,
    max_size=40,
)


def _setup(seed: int) -> tuple[Router, FakeClient, list[FakeClient], FakeClient]:
    router = Router(Sublist(), random.Random(seed))
    plain = FakeClient()
    members = [FakeClient() for _ in range(3)]
    router.sublist.insert(Subscription(plain, b"q.>", None, b"1"))
    for i, c in enumerate(members):
        router.sublist.insert(Subscription(c, b"q.x", b"workers", b"%d" % (10 + i)))
    return router, plain, members, FakeClient()


def _split(data: bytes) -> list[bytes]:
    """MSG ops of one client's output, each as bytes (payloads hold no CRLF)."""
    out = []
    while data:
        line_end = data.index(b"\r\n")
        size = int(data[:line_end].rsplit(b" ", 1)[1])
        end = line_end + 2 + size + 2
        out.append(data[:end])
        data = data[end:]
    return out


@settings(max_examples=120, deadline=None)
@given(MSGS, st.integers(0, 2**16), st.integers(1, 8))
def test_queue_runs_deliver_each_message_once_per_group(
    msgs: list[tuple[bytes | None, bytes]], seed: int, run_len: int
) -> None:
    router, plain, members, pub_c = _setup(seed)
    pub, pub_run, _ = router.fast_publisher(pub_c)
    for i in range(0, len(msgs), run_len):
        run = msgs[i : i + run_len]
        if len(run) == 1:
            pub(b"q.x", run[0][0], run[0][1])
        else:
            pub_run(b"q.x", [r for r, _ in run], [p for _, p in run])
    router.flush()
    assert plain.written() == b"".join(msg_bytes(b"q.x", b"1", r, p) for r, p in msgs)
    # every message exactly once in the group, each member's share in order
    wanted = [(r, p) for r, p in msgs]
    shares = []
    for i, c in enumerate(members):
        sid = b"%d" % (10 + i)
        ops = _split(c.written())
        shares.append(ops)
        assert c.out_msgs == len(ops)
        expected_ops = [msg_bytes(b"q.x", sid, r, p) for r, p in wanted]
        it = iter(expected_ops)
        assert all(op in it for op in ops)  # an in-order subsequence
    assert sum(map(len, shares)) == len(msgs)
    assert router.out_msgs == 2 * len(msgs)


def test_queue_plan_matches_once_not_per_message() -> None:
    """Counting test: sublist matches for a queue subject do not grow with the messages."""
    for n in (10, 1000):
        router, _plain, members, pub_c = _setup(7)
        calls = 0
        match = router.sublist.match

        def counted(subject: bytes, _m=match):  # type: ignore[no-untyped-def]
            nonlocal calls
            calls += 1
            return _m(subject)

        router.sublist.match = counted  # type: ignore[method-assign]
        pub, pub_run, _ = router.fast_publisher(pub_c)
        pub(b"q.x", None, b"first")  # makes the plan
        for _ in range(n // 10):
            pub_run(b"q.x", [None] * 10, [b"m"] * 10)
        router.flush()
        assert calls == 1
        assert sum(c.out_msgs for c in members) == n // 10 * 10 + 1
        # the draw is spread: with 1000 messages every member got some
        if n == 1000:
            assert all(c.out_msgs > 0 for c in members)


def test_queue_plan_retired_by_interest_change_and_skipped_for_routes() -> None:
    router, plain, members, pub_c = _setup(3)
    pub, pub_run, _ = router.fast_publisher(pub_c)
    pub(b"q.x", None, b"a")
    assert router._qplan(b"q.x") is not None
    # a member leaves: the server bumps the generation, the plan is retired
    sub = router.sublist.match(b"q.x").qsubs[0][0]
    router.sublist.remove(sub)
    router.gen += 1
    assert router._qplan(b"q.x") is None
    pub_run(b"q.x", [None, None], [b"b", b"c"])
    router.flush()
    assert sub.client.written().count(b"MSG") <= 1  # nothing after it left
    # a message from a route without queue names reaches plain subscribers only
    route = FakeClient()
    routed, routed_run = router.fast_routed(route)
    for c in members:
        c.written()
    plain.written()
    routed_run(b"q.x", [None, None], [b"r1", b"r2"])
    routed(b"q.x", None, b"r3")
    router.flush()
    assert all(c.written() == b"" for c in members)
    assert plain.written().count(b"MSG") == 3


def test_no_echo_publisher_in_the_group_takes_publish() -> None:
    router, _plain, members, _ = _setup(5)
    members[0].echo = False
    pub, _, _ = router.fast_publisher(members[0])
    for _ in range(50):
        pub(b"q.x", None, b"x")
    router.flush()
    assert router._qplan(b"q.x") is None
    assert members[0].written() == b""
    assert members[1].out_msgs + members[2].out_msgs == 50
