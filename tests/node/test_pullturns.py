"""Waiting pull requests taking turns (``node.jetstream.pullturns``), pure."""

from __future__ import annotations

from dataclasses import dataclass

from cluster.consumer_model import PriorityPolicy
from node.jetstream.pullturns import TURNS_MSGS_MAX, PickTurns, Turns, msg_size
from store.api import StoredMsg


@dataclass
class Req:
    name: str
    n: int
    max_bytes: int = 0
    delivered: int = 0


def msg(seq: int, payload: bytes = b"x") -> StoredMsg:
    return StoredMsg(seq, "s.a", b"", payload, 0)


def owners(turns: Turns[Req], seqs: range) -> list[str]:
    return [turns.owner[s].name for s in seqs]


def test_one_message_each_in_turn_then_the_rest_to_who_still_wants() -> None:
    a, b, c = Req("a", 3), Req("b", 1), Req("c", 2)
    turns = Turns([a, b, c])
    assert turns.wants() == 6
    assert all(turns.take(msg(s)) for s in range(1, 7))
    assert owners(turns, range(1, 7)) == ["a", "b", "c", "a", "c", "a"]
    assert not turns.take(msg(7))  # every batch is full
    assert turns.order() == []


def test_order_after_a_partial_round() -> None:
    a, b, c = Req("a", 5), Req("b", 5), Req("c", 5)
    turns = Turns([a, b, c])
    for s in range(1, 5):
        assert turns.take(msg(s))
    assert owners(turns, range(1, 5)) == ["a", "b", "c", "a"]
    assert [r.name for r in turns.order()] == ["b", "c", "a"]  # b's turn next


def test_max_bytes_drops_a_request_the_message_does_not_fit() -> None:
    size = msg_size(msg(1, b"x" * 10))
    small = Req("small", 5, max_bytes=size + 1)  # one message fits
    big = Req("big", 5)
    served = Req("served", 5, max_bytes=1, delivered=2)  # got messages before
    turns = Turns([small, served, big])
    for s in range(1, 4):
        assert turns.take(msg(s, b"x" * 10))
    assert owners(turns, range(1, 4)) == ["small", "big", "big"]
    # small took one and did not fit the next: dropped unanswered; served had
    # messages before: dropped unanswered too
    assert turns.dropped == [(served, False), (small, False)]
    fresh = Req("fresh", 1, max_bytes=1)
    turns = Turns([fresh])
    assert not turns.take(msg(1, b"x" * 10))
    assert turns.dropped == [(fresh, True)]  # nothing yet: answered 409


def test_wants_is_bounded() -> None:
    assert Turns([Req("a", 10**9), Req("b", 5)]).wants() == TURNS_MSGS_MAX


@dataclass
class PReq:
    name: str
    n: int
    max_bytes: int = 0
    delivered: int = 0
    group: str = "A"
    min_pending: int = 0
    min_ack_pending: int = 0
    pin_id: str = ""
    priority: int = 0
    formal: bool = True


def pick_turns(reqs: list[PReq], policy: PriorityPolicy, **kw: object) -> PickTurns[PReq]:
    pins: list[str] = []

    def new_pin(wr: PReq) -> str:
        pins.append(f"pin{len(pins) + 1}")
        wr.pin_id = pins[-1]
        return pins[-1]

    args: dict[str, object] = {
        "pin_id": "",
        "pending": 100,
        "ack_pending": 0,
        "counts_acks": True,
        "next_sseq": 1,
        "new_pin": new_pin,
        "drop_pin": lambda: None,
    }
    args.update(kw)
    return PickTurns(reqs, policy, **args)  # type: ignore[arg-type]


def test_pinned_requests_take_turns_the_unpinned_wait_another_pin_is_refused() -> None:
    a, n, b, old = PReq("a", 3, pin_id="P"), PReq("n", 3), PReq("b", 3, pin_id="P"), PReq("o", 1)
    old.pin_id = "OLD"
    turns = pick_turns([a, n, old, b], PriorityPolicy.PINNED_CLIENT, pin_id="P")
    assert all(turns.take(msg(s)) for s in range(1, 7))
    assert [turns.owner[s].name for s in range(1, 7)] == ["a", "b", "a", "b", "a", "b"]
    assert turns.refused == [old]
    assert not turns.take(msg(7))  # only the unpinned one is left: it waits
    assert [r.name for r in turns.order()] == ["n"]


def test_first_request_without_a_pin_is_pinned_then_only_it_is_served() -> None:
    a, b = PReq("a", 2), PReq("b", 2)
    turns = pick_turns([a, b], PriorityPolicy.PINNED_CLIENT)
    assert all(turns.take(msg(s)) for s in range(1, 3))
    assert [turns.owner[s].name for s in (1, 2)] == ["a", "a"]
    assert turns.pin_id == "pin1" and a.pin_id == "pin1"
    assert not turns.take(msg(3))


def test_overflow_min_pending_takes_turns_while_pending_reaches_it() -> None:
    a, m, b = PReq("a", 4), PReq("m", 4, min_pending=3), PReq("b", 4)
    turns = pick_turns([a, m, b], PriorityPolicy.OVERFLOW, pending=8)
    assert all(turns.take(msg(s)) for s in range(1, 9))
    # as nats-server 2.15.1: o0..o7 go a m b a m b a b
    assert [turns.owner[s].name for s in range(1, 9)] == ["a", "m", "b", "a", "m", "b", "a", "b"]


def test_overflow_min_ack_pending_counts_the_deliveries_of_the_round() -> None:
    m = PReq("m", 5, min_ack_pending=2)
    turns = pick_turns([m], PriorityPolicy.OVERFLOW, pending=10, ack_pending=1)
    assert not turns.take(msg(1))  # one pending ack: below its minimum
    turns = pick_turns([PReq("a", 1), m], PriorityPolicy.OVERFLOW, pending=10, ack_pending=1)
    assert turns.take(msg(1)) and turns.take(msg(2))
    assert [turns.owner[s].name for s in (1, 2)] == ["a", "m"]


def test_assign_counts_as_takes_would() -> None:
    """``assign(k)`` gives every member the share, and leaves the ring in the
    order, that ``k`` calls of ``take`` would (exhaustive over small cases)."""
    import itertools

    for ns in itertools.chain.from_iterable(
        itertools.product(range(1, 5), repeat=m) for m in range(1, 4)
    ):
        for k in range(sum(ns) + 2):
            one = [Req(f"r{i}", n) for i, n in enumerate(ns)]
            other = [Req(f"r{i}", n) for i, n in enumerate(ns)]
            by_take = Turns(one)
            for s in range(1, k + 1):
                by_take.take(msg(s))
            shares: dict[str, int] = {}
            for r in by_take.owner.values():
                shares[r.name] = shares.get(r.name, 0) + 1
            by_count = Turns(other)
            assert not by_count.sized()
            got = {r.name: n for r, n in by_count.assign(k)}
            assert got == shares, (ns, k)
            assert [r.name for r in by_count.order()] == [r.name for r in by_take.order()]
