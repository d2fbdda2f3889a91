"""``next_messages``: the forward read of an unfiltered consumer (``load_run``
in growing runs) skips gaps and stops at the end exactly like the filtered
walk, on memory and file stores."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.consumer_fsm import ConsumerStateMachine, next_messages
from cluster.consumer_fsm.select import RUN_MAX, RUN_MIN
from cluster.ops import ConsumerCreated, ConsumerDelivered, ConsumerPolicy
from store.api import StoredMsg
from store.file import FileStreamStore
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


class _RecordingStore(MemoryStreamStore):
    """Records the sizes ``next_messages`` asks ``load_run`` for."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[int] = []

    def load_run(self, start_seq: int, max_msgs: int) -> list[StoredMsg]:
        self.runs.append(max_msgs)
        return super().load_run(start_seq, max_msgs)


def test_unfiltered_reads_in_growing_runs_within_max_ack_pending() -> None:
    store = _RecordingStore()
    for i in range(1000):
        store.append("s", b"", b"x", i)
    got = [m.seq for m in next_messages(_fsm(ack="none"), store)]
    assert got == list(range(1, 1001))
    assert store.runs[:6] == [RUN_MIN, 2 * RUN_MIN, 4 * RUN_MIN, RUN_MAX, RUN_MAX, RUN_MAX]
    store.runs.clear()
    it = next_messages(_fsm(), store)
    assert [next(it).seq for _ in range(3)] == [1, 2, 3]
    assert store.runs == [RUN_MIN]  # a caller taking few costs one run
    store.runs.clear()
    fsm = _fsm(ack="none")
    for want in (100, 100, 7, 300):  # a caller saying it takes n reads n first
        it = next_messages(fsm, store, want)
        picked = [next(it) for _ in range(want)]
        it.close()
        fsm.apply_op(ConsumerDelivered("C", tuple(m.seq for m in picked), 1))
    assert store.runs == [100, 100, 7, RUN_MAX, 300 - RUN_MAX]
    store.runs.clear()
    fsm = _fsm(max_ack_pending=5)
    fsm.apply_op(ConsumerDelivered("C", (1, 2), 1))
    assert [m.seq for m in next_messages(fsm, store)] == [3, 4, 5]
    assert store.runs == [3]  # no more than max_ack_pending leaves room for


def test_unfiltered_next_messages_on_a_file_store(tmp_path: Path) -> None:
    """The same answers from a file store (tiny segments, compressed) as from memory."""
    file = FileStreamStore(tmp_path, segment_bytes_max=1000, compression=True)
    mem = MemoryStreamStore()
    for store in (file, mem):
        for i in range(700):
            store.append(f"s.{i % 3}", b"", b"m%d" % i, i)
        for seq in [*range(100, 160), 333, 334, 699]:
            store.remove(seq)
    for delivered, mack in ((0, 0), (0, 40), (150, 0), (400, 300), (300, 400), (690, 0)):
        first = [m.seq for m in mem.load_run(1, delivered)]
        want = None
        for store in (mem, file):
            fsm = _fsm(max_ack_pending=mack)
            if first:
                fsm.apply_op(ConsumerDelivered("C", tuple(first), 1))
            got = list(next_messages(fsm, store))
            want = got if want is None else want
            assert got == want
        left = 637 - len(first)
        assert want is not None and len(want) == (
            min(left, max(0, mack - len(first))) if mack else left
        )
    file.close()
