"""``ConsumerAcked`` (plain acks as sequence arrays) does exactly what
``ConsumerAcks`` of ``ACK`` items does, and survives encoding."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.consumer_fsm import ConsumerStateMachine
from cluster.ops import (
    AckItem,
    AckKind,
    ConsumerAcked,
    ConsumerAcks,
    ConsumerCreated,
    ConsumerDelivered,
    ConsumerPolicy,
    OpError,
    decode_any,
    encode_op,
)
from store.memory import MemoryConsumerStore


def _fsm(ack: str, max_ack_pending: int) -> ConsumerStateMachine:
    fsm = ConsumerStateMachine("C", MemoryConsumerStore(), save_each_op=False)
    fsm.apply_op(
        ConsumerCreated("C", ConsumerPolicy(ack=ack, max_ack_pending=max_ack_pending), 1, ())
    )
    return fsm


@settings(max_examples=80, deadline=None)
@given(
    ack=st.sampled_from(["explicit", "all", "none"]),
    delivered=st.integers(0, 20),
    acks=st.lists(st.tuples(st.integers(0, 25), st.integers(0, 25)), min_size=1, max_size=30),
    max_ack_pending=st.integers(0, 5),
)
def test_acked_matches_ack_items(
    ack: str, delivered: int, acks: list[tuple[int, int]], max_ack_pending: int
) -> None:
    a, b = _fsm(ack, max_ack_pending), _fsm(ack, max_ack_pending)
    if delivered:
        for f in (a, b):
            f.apply_op(ConsumerDelivered("C", tuple(range(1, delivered + 1)), 5))
    sseqs, dseqs = tuple(s for s, _ in acks), tuple(d for _, d in acks)
    out_a = a.apply_op(ConsumerAcked("C", sseqs, dseqs, 9))
    items = tuple(AckItem(AckKind.ACK, s, d) for s, d in acks)
    out_b = b.apply_op(ConsumerAcks("C", items, 9))
    assert out_a == out_b
    assert a.state() == b.state()
    assert (a.floor_dseq, a.floor_sseq, a.last_ack_ns) == (b.floor_dseq, b.floor_sseq, 9)
    a.flush()  # the deferred save lands in the store
    assert a._store.load() == a.state()


def test_acked_round_trip_and_checks() -> None:
    op = ConsumerAcked("C", (3, 4), (1, 2), 7)
    assert decode_any(encode_op(op)) == op
    for bad in (
        lambda: ConsumerAcked("C", (), (), 1),
        lambda: ConsumerAcked("C", (1,), (1, 2), 1),
        lambda: ConsumerAcked("C", (True,), (1,), 1),
        lambda: ConsumerAcked("C", (-1,), (1,), 1),
        lambda: ConsumerAcked("C", [1], [1], 1),  # type: ignore[arg-type]
    ):
        with pytest.raises(OpError):
            bad()


@settings(max_examples=120, deadline=None)
@given(
    ack=st.sampled_from(["explicit", "all", "none"]),
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("deliver"), st.lists(st.integers(1, 30), min_size=1, max_size=8)),
            st.tuples(st.just("ack"), st.lists(st.integers(1, 30), min_size=1, max_size=4)),
            st.tuples(st.just("nak"), st.lists(st.integers(1, 30), min_size=1, max_size=2)),
        ),
        max_size=12,
    ),
)
def test_delivered_fast_path_matches_the_general_loop(
    ack: str, steps: list[tuple[str, list[int]]]
) -> None:
    """``ConsumerDelivered`` of new messages takes a fast loop; it must decide
    exactly what the general loop decides, whatever came before (redeliveries
    queued, stale or out-of-order sequences in the op, acks, naks)."""
    a, b = _fsm(ack, 0), _fsm(ack, 0)
    b._delivered = lambda op, out: b._delivered_from(op.sseqs, op.now_ns, out)  # type: ignore[method-assign]
    now = 5
    for kind, seqs in steps:
        now += 1
        if kind == "deliver":
            op = ConsumerDelivered("C", tuple(sorted(set(seqs))), now)
        elif kind == "ack":
            op = ConsumerAcked("C", tuple(seqs), tuple(seqs), now)
        else:
            op = ConsumerAcks("C", tuple(AckItem(AckKind.NAK, s, s) for s in seqs), now)
        assert a.apply_op(op) == b.apply_op(op)
        assert a.state() == b.state()
        assert (a.next_sseq, a.dseq, a.last_delivered_ns) == (
            b.next_sseq,
            b.dseq,
            b.last_delivered_ns,
        )
