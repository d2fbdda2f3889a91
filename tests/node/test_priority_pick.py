"""Pure units: the waiting-request pick of priority groups (node/jetstream/priority.py)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.consumer_model import PriorityPolicy
from node.jetstream.priority import insert_prioritized, pick, with_pin_header

OVERFLOW = PriorityPolicy.OVERFLOW
PINNED = PriorityPolicy.PINNED_CLIENT


@dataclass
class W:
    name: str
    group: str = "A"
    min_pending: int = 0
    min_ack_pending: int = 0
    pin_id: str = ""
    priority: int = 0
    formal: bool = True


def names(ws: deque[W]) -> list[str]:
    return [w.name for w in ws]


# -- pinned_client ------------------------------------------------------------------


def test_first_request_without_id_takes_a_new_pin() -> None:
    q = deque([W("a"), W("b")])
    p = pick(q, PINNED, "", 5, 0)
    assert p.wr is q[0] and p.wr.name == "a"
    assert p.new_pin and p.refused == [] and p.limit is None


def test_without_pin_requests_with_an_old_id_are_refused() -> None:
    q = deque([W("old", pin_id="X"), W("new")])
    p = pick(q, PINNED, "", 5, 0)
    assert [r.name for r in p.refused] == ["old"]
    assert p.wr is not None and p.wr.name == "new" and p.new_pin
    assert names(q) == ["new"]


def test_while_pinned_requests_without_id_wait_and_others_are_refused() -> None:
    q = deque([W("none1"), W("wrong", pin_id="Y"), W("none2"), W("mine", pin_id="P")])
    p = pick(q, PINNED, "P", 5, 0)
    assert p.wr is not None and p.wr.name == "mine" and not p.new_pin
    assert [r.name for r in p.refused] == ["wrong"]
    assert names(q) == ["mine", "none1", "none2"]  # the waiting ones moved behind


def test_while_pinned_only_unpinned_requests_nothing_served() -> None:
    q = deque([W("a"), W("b")])
    p = pick(q, PINNED, "P", 5, 0)
    assert p.wr is None and p.refused == []
    assert sorted(names(q)) == ["a", "b"]


def test_a_plain_request_gets_no_pin() -> None:
    """nats-server serves a non-JSON request without assigning a pin."""
    q = deque([W("plain", group="", formal=False)])
    p = pick(q, PINNED, "", 5, 0)
    assert p.wr is not None and not p.new_pin


# -- overflow ----------------------------------------------------------------------


def test_overflow_without_minimums_is_served() -> None:
    q = deque([W("a")])
    p = pick(q, OVERFLOW, "", 0, 0)
    assert p.wr is not None and p.limit is None


def test_overflow_min_pending_bounds_the_run() -> None:
    # 5 pending, min 4: nats-server sends 2 (pending 5 then 4), then stops
    q = deque([W("a", min_pending=4)])
    p = pick(q, OVERFLOW, "", 5, 0)
    assert p.wr is not None and p.limit == 2


def test_overflow_below_minimums_waits() -> None:
    q = deque([W("a", min_pending=10), W("b", min_ack_pending=3)])
    p = pick(q, OVERFLOW, "", 5, 2)
    assert p.wr is None
    assert sorted(names(q)) == ["a", "b"]


def test_overflow_ack_pending_is_unbounded_once_met() -> None:
    q = deque([W("a", min_pending=10, min_ack_pending=2), W("b")])
    p = pick(q, OVERFLOW, "", 3, 2)
    assert p.wr is not None and p.wr.name == "a" and p.limit is None


def test_overflow_redelivery_counts_one_more_and_goes_one_at_a_time() -> None:
    q = deque([W("a", min_pending=4)])
    assert pick(q, OVERFLOW, "", 3, 0).wr is None
    p = pick(q, OVERFLOW, "", 3, 0, redelivery_next=True)
    assert p.wr is not None and p.limit == 1


@st.composite
def waiters(draw: st.DrawFn) -> list[W]:
    n = draw(st.integers(0, 8))
    return [
        W(
            str(i),
            min_pending=draw(st.integers(0, 12)),
            min_ack_pending=draw(st.integers(0, 12)),
        )
        for i in range(n)
    ]


@given(waiters(), st.integers(0, 12), st.integers(0, 12))
@settings(max_examples=200, deadline=None)
def test_overflow_serves_exactly_the_first_eligible(ws: list[W], pending: int, acks: int) -> None:
    def eligible(w: W) -> bool:
        if w.min_pending == 0 and w.min_ack_pending == 0:
            return True
        return 0 < w.min_pending <= pending or 0 < w.min_ack_pending <= acks

    q = deque(ws)
    p = pick(q, OVERFLOW, "", pending, acks)
    first = next((w for w in ws if eligible(w)), None)
    assert p.wr is first
    assert sorted(names(q)) == sorted(w.name for w in ws)  # nothing lost
    if first is not None:
        assert q[0] is first
        if p.limit is not None:
            # the run stops where the pending count would drop below the minimum
            assert p.limit >= 1 and pending - (p.limit - 1) >= first.min_pending
            assert pending - p.limit < first.min_pending


@given(
    st.lists(st.sampled_from(["", "P", "X", "Y"]), max_size=8),
    st.sampled_from(["", "P"]),
)
@settings(max_examples=200, deadline=None)
def test_pinned_invariants(ids: list[str], pin: str) -> None:
    ws = [W(str(i), pin_id=x) for i, x in enumerate(ids)]
    q = deque(ws)
    p = pick(q, PINNED, pin, 5, 0)
    kept = set(names(q))
    refused = {r.name for r in p.refused}
    assert kept | refused == {w.name for w in ws} and not kept & refused
    for r in p.refused:
        assert r.pin_id and r.pin_id != pin
    if p.wr is not None:
        assert q[0] is p.wr
        assert p.wr.pin_id == pin if pin else p.wr.pin_id == ""
        assert p.new_pin == (not pin)
    elif pin:
        assert all(w.pin_id != pin for w in ws)
    else:
        assert all(w.pin_id for w in ws)


# -- prioritized, header ------------------------------------------------------------


@given(st.lists(st.integers(0, 9), max_size=12))
@settings(max_examples=100, deadline=None)
def test_prioritized_insertion_is_stable_by_priority(prios: list[int]) -> None:
    q: deque[W] = deque()
    for i, p in enumerate(prios):
        insert_prioritized(q, W(str(i), priority=p))
    assert [w.name for w in q] == [
        str(i) for i, _ in sorted(enumerate(prios), key=lambda t: (t[1], t[0]))
    ]


def test_plain_requests_rank_last() -> None:
    q: deque[W] = deque()
    insert_prioritized(q, W("plain", formal=False))
    insert_prioritized(q, W("nine", priority=9))
    assert names(q) == ["nine", "plain"]


def test_pin_header_as_gen_header() -> None:
    assert with_pin_header(b"", "abc") == b"NATS/1.0\r\nNats-Pin-Id: abc\r\n\r\n"
    assert (
        with_pin_header(b"NATS/1.0\r\nK: v\r\n\r\n", "")
        == b"NATS/1.0\r\nK: v\r\nNats-Pin-Id: \r\n\r\n"
    )
