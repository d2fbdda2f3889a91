"""``next_messages``: the next-sequence lookup of an unfiltered consumer
skips gaps and stops at the end exactly like the filtered walk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.consumer_fsm import ConsumerStateMachine, next_messages
from cluster.ops import ConsumerCreated, ConsumerDelivered, ConsumerPolicy
from store.memory import MemoryConsumerStore, MemoryStreamStore


def _fsm(ack: str = "explicit", max_ack_pending: int = 0) -> ConsumerStateMachine:
    fsm = ConsumerStateMachine("C", MemoryConsumerStore())
    policy = ConsumerPolicy(ack=ack, max_ack_pending=max_ack_pending)
    fsm.apply_op(ConsumerCreated("C", policy, 1, ()))
    return fsm


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 30),
    removed=st.sets(st.integers(1, 30)),
    delivered=st.integers(0, 12),
    max_ack_pending=st.integers(0, 8),
)
def test_unfiltered_next_messages_skip_gaps(
    n: int, removed: set[int], delivered: int, max_ack_pending: int
) -> None:
    store = MemoryStreamStore()
    for i in range(n):
        store.append(f"s.{i % 3}", b"", b"x", i)
    for seq in sorted(removed):
        if seq <= n:
            store.remove(seq)
    fsm = _fsm(max_ack_pending=max_ack_pending)
    live = [s for s in range(1, n + 1) if s not in removed]
    first = live[:delivered]
    if first:
        fsm.apply_op(ConsumerDelivered("C", tuple(first), 1))
    got = [m.seq for m in next_messages(fsm, store)]
    rest = [s for s in live if s > (first[-1] if first else 0)]
    if max_ack_pending:
        rest = rest[: max(0, max_ack_pending - len(first))]
    assert got == rest
