"""Waiting pull requests taking turns (``node.jetstream.pullturns``), pure."""

from __future__ import annotations

from dataclasses import dataclass

from node.jetstream.pullturns import TURNS_MSGS_MAX, Turns, msg_size
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
