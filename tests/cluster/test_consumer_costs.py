"""What a filtered consumer costs per delivered message, counted, not timed.

nats-py's ``pull_subscribe`` and libnats' ``js_PullSubscribe`` both set
``filter_subject``, so the filtered path is the common one.  Each check drives
the consumer state machine as the shell does — pick with ``next_messages``,
decide with ``ConsumerDelivered``, ack, and count ``num_pending`` after every
batch — over a stream of 1k and of 100k messages, and counts the messages the
store hands out (every ``StoredMsg`` built); the count at 100k must stay
within 1.5x of the count at 1k.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from cluster.consumer_fsm import (
    ConsumerStateMachine,
    count_pending,
    next_messages,
    policy_of,
    select_start,
)
from cluster.consumer_model import AckPolicy, ConsumerConfig
from cluster.ops import AckItem, AckKind, ConsumerAcks, ConsumerCreated, ConsumerDelivered
from store.file import FileStreamStore
from store.memory import MemoryConsumerStore, MemoryStreamStore

S = 1_000_000_000
READS = ("load", "load_next", "load_run", "load_next_run", "load_last")


class Counting:
    """A store whose reads are counted (messages handed out)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.msgs = 0

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.inner, name)
        if name not in READS:
            return fn

        def counted(*a: Any, **kw: Any) -> Any:
            out = fn(*a, **kw)
            if isinstance(out, list):
                self.msgs += len(out)
            elif out is not None:
                self.msgs += 1
            return out

        return counted


def build(kind: str, n: int, tmp: Path) -> Any:
    st: Any = MemoryStreamStore() if kind == "memory" else FileStreamStore(tmp / f"s{n}")
    for i in range(n):  # three subjects, the consumer wants one of them
        st.append(("orders.new", "orders.paid", "audit")[i % 3], b"", b"x" * 16, i + 1)
    return st


def consume(kind: str, n: int, tmp: Path, filters: tuple[str, ...]) -> float:
    """Store messages read per delivered message, over 300 deliveries."""
    raw = build(kind, n, tmp)
    st = Counting(raw)
    cfg = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, filter_subjects=filters, max_deliver=-1)
    fsm = ConsumerStateMachine("c", MemoryConsumerStore())
    start, lss = select_start(cfg, raw)
    fsm.apply_op(ConsumerCreated("c", policy_of(cfg), start, lss))
    delivered = 0
    st.msgs = 0
    for _ in range(3):
        picked = [m.seq for m in islice(next_messages(fsm, st, 100), 100)]
        out = fsm.apply_op(ConsumerDelivered("c", tuple(picked), 1))
        acks = tuple(AckItem(AckKind.ACK, d.sseq, d.dseq, -1, "") for d in out.deliveries)
        fsm.apply_op(ConsumerAcks("c", acks, 1))
        delivered += len(out.deliveries)
        count_pending(st, filters, fsm.next_sseq)
    if kind != "memory":
        raw.close()
    assert delivered == 300
    return st.msgs / delivered


@pytest.mark.parametrize("kind", ["file", "memory"])
@pytest.mark.parametrize(
    "filters", [("orders.new",), ("orders.*",), ("orders.new", "audit"), ()], ids=str
)
def test_reads_per_delivery_do_not_grow_with_the_stream(
    kind: str, filters: tuple[str, ...], tmp_path: Path
) -> None:
    small = consume(kind, 1_000, tmp_path, filters)
    big = consume(kind, 100_000, tmp_path, filters)
    assert small <= 2.0, small  # a message read about once, not once per count
    assert big <= 1.5 * small, (small, big)
