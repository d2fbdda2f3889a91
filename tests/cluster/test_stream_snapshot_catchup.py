"""A stream group's state snapshot (``cluster.stream_snapshot``) and catch-up by streaming
the store (``cluster.catchup``): codec, bounded batches, reconcile, and the replicated FSM's
snapshot/restore with its hole gates."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster import catchup
from cluster.consumer_model import ConsumerConfig
from cluster.consumer_table import config_bytes
from cluster.ops import (
    ConsumerAcked,
    ConsumerAssign,
    ConsumerDelivered,
    DeleteMsg,
    Publish,
    StreamMsg,
    StreamPolicy,
    encode_op,
)
from cluster.replicated import ReplicatedStreamFSM
from cluster.stream_fsm import StreamSnapshotError, StreamStateMachine
from cluster.stream_snapshot import (
    ConsumerSnap,
    GroupSnapshot,
    decode_group_snapshot,
    encode_group_snapshot,
    ranges,
)
from store.memory import MemoryStreamStore

T0 = 1_700_000_000 * 1_000_000_000
CFG = ConsumerConfig.from_dict({"durable_name": "D", "ack_policy": "explicit", "ack_wait": 10**9})


def _snap(**kw: object) -> GroupSnapshot:
    base: dict[str, object] = dict(
        index=7,
        first_seq=3,
        last_seq=10,
        last_ts=T0,
        msgs=5,
        bytes=500,
        deleted=((5, 6), (8, 8)),
        last_msg_id="id\udcff",
        dedupe=(("a", 9, T0), ("b", 10, T0 + 1)),
        consumers=(ConsumerSnap("D", b"{}", 5, "C-R3F-x", b"\x01"),),
        interest=("a.>", "b"),
    )
    base.update(kw)
    return GroupSnapshot(**base)  # type: ignore[arg-type]


def test_group_snapshot_round_trips() -> None:
    for s in (_snap(), _snap(interest=None), _snap(interest=())):
        assert decode_group_snapshot(encode_group_snapshot(s)) == s


def test_interest_filters_travel_with_the_snapshot() -> None:
    """Interest retention decides in log order whether a publish is stored: a replica
    installing a snapshot must decide the next publishes with the same filters."""
    from cluster.ops import Interest

    leader = _rfsm()
    leader.apply_at(encode_op(Interest(("keep.>",))), 1)
    follower = _rfsm()
    follower.restore(io.BytesIO(leader.snapshot()))
    assert follower.current and follower.fsm.interest == ("keep.>",)
    for r in (leader, follower):
        r.apply_at(encode_op(StreamMsg((Publish("drop.x", None, b"1", T0),))), 2)
        r.apply_at(encode_op(StreamMsg((Publish("keep.x", None, b"2", T0),))), 3)
    assert [m.subject for m in follower.fsm.store.load_run(1, 10)] == ["keep.x"]
    assert leader.fsm.store.state() == follower.fsm.store.state()


@pytest.mark.parametrize(
    "bad",
    [
        {"first_seq": 12},  # past last_seq + 1
        {"deleted": ((5, 11),)},  # beyond last_seq
        {"deleted": ((5, 6), (6, 7))},  # overlapping
        {"deleted": ((6, 5),)},
    ],
)
def test_group_snapshot_refuses_inconsistent_documents(bad: dict[str, object]) -> None:
    with pytest.raises(StreamSnapshotError):
        decode_group_snapshot(encode_group_snapshot(_snap(**bad)))


def test_group_snapshot_refuses_garbage() -> None:
    for blob in (b"", b"\xff\x00", encode_group_snapshot(_snap())[:-3]):
        with pytest.raises(StreamSnapshotError):
            decode_group_snapshot(blob)


@given(st.sets(st.integers(1, 200), max_size=60))
def test_ranges_cover_exactly_the_sequences(seqs: set[int]) -> None:
    rs = ranges(seqs)
    covered = {s for a, b in rs for s in range(a, b + 1)}
    assert covered == seqs
    assert all(rs[i][1] + 1 < rs[i + 1][0] for i in range(len(rs) - 1))  # maximal runs


# -- catch-up batches ------------------------------------------------------------------------


def _store(n: int, size: int = 10, deleted: tuple[int, ...] = ()) -> MemoryStreamStore:
    s = MemoryStreamStore()
    for i in range(1, n + 1):
        s.append(f"s.{i % 3}", b"", bytes([i % 251]) * size, T0 + i)
    for d in deleted:
        s.remove(d)
    return s


def _contents(s: MemoryStreamStore) -> list[tuple[int, str, bytes, int]]:
    return [(m.seq, m.subject, m.payload, m.ts_ns) for m in s.load_run(1, 10**9)]


def _copy(src: MemoryStreamStore, dst: MemoryStreamStore, to: int, **bounds: int) -> list[int]:
    """Run the catch-up protocol (encoded both ways) until ``dst`` reaches ``to``;
    the batch sizes seen."""
    sizes = []
    while dst.state().last_seq < to:
        req = catchup.encode_request(1, dst.state().last_seq + 1, to)
        _, a, b = catchup.decode_request(req)
        through, msgs = catchup.serve_batch(src, a, b, **bounds)
        _, through, msgs = catchup.decode_reply(catchup.encode_reply(1, through, msgs))
        catchup.install_batch(dst, through, msgs)
        sizes.append(len(msgs))
    return sizes


def test_batches_are_bounded_by_count_and_bytes() -> None:
    src = _store(1000, size=100)
    through, msgs = catchup.serve_batch(src, 1, 1000, msgs_max=64, bytes_max=10**9)
    assert len(msgs) == 64 and through == 64
    through, msgs = catchup.serve_batch(src, 1, 1000, msgs_max=10**6, bytes_max=1000)
    assert 1 <= len(msgs) <= 10 and through == msgs[-1].seq
    # one message larger than the byte bound still goes (alone)
    big = _store(3, size=5000)
    through, msgs = catchup.serve_batch(big, 1, 3, bytes_max=1000)
    assert [m.seq for m in msgs] == [1] and through == 1


def test_copy_through_batches_keeps_sequences_and_gaps() -> None:
    src = _store(500, deleted=(1, 2, 50, 51, 52, 300, 500))
    dst = MemoryStreamStore()
    sizes = _copy(src, dst, 500, msgs_max=37, bytes_max=10**6)
    assert max(sizes) <= 37 and len(sizes) > 10
    assert _contents(dst) == _contents(src)
    assert dst.state().last_seq == 500
    assert dst.state().first_seq == src.state().first_seq == 3
    assert dst.state().num_deleted == src.state().num_deleted


def test_a_repeated_answer_is_harmless() -> None:
    src = _store(20)
    dst = MemoryStreamStore()
    through, msgs = catchup.serve_batch(src, 1, 20, msgs_max=8)
    catchup.install_batch(dst, through, msgs)
    catchup.install_batch(dst, through, msgs)
    _copy(src, dst, 20)
    assert _contents(dst) == _contents(src)


def test_memory_of_a_large_copy_stays_one_batch() -> None:
    """A stream of many megabytes is copied batch by batch; no batch exceeds the bound."""
    src = MemoryStreamStore()
    payload = b"x" * 4096
    for i in range(4000):  # ~16 MB
        src.append("big", b"", payload, T0 + i)
    dst = MemoryStreamStore()
    cap = 256 * 1024
    while dst.state().last_seq < 4000:
        through, msgs = catchup.serve_batch(src, dst.state().last_seq + 1, 4000, bytes_max=cap)
        assert sum(len(m.payload) for m in msgs) <= cap + len(payload)
        catchup.install_batch(dst, through, msgs)
    assert dst.state().msgs == 4000


def test_reconcile_removes_what_the_stream_had_removed() -> None:
    follower = _store(12)  # holds 1..12
    snap = _snap(first_seq=3, last_seq=10, deleted=((5, 6), (8, 8)))
    catchup.reconcile(follower, snap)
    st = follower.state()
    assert st.last_seq == 10 and st.first_seq == 3
    assert [m.seq for m in follower.load_run(1, 100)] == [3, 4, 7, 9, 10]


def test_reconcile_of_an_empty_store_starts_at_first_seq() -> None:
    empty = MemoryStreamStore()
    catchup.reconcile(empty, _snap(first_seq=40, last_seq=50, deleted=()))
    assert empty.state().last_seq == 39


# -- the replicated FSM's snapshot, restore and gates ---------------------------------------


def _rfsm(store: MemoryStreamStore | None = None) -> ReplicatedStreamFSM:
    s = store if store is not None else MemoryStreamStore()
    return ReplicatedStreamFSM(StreamStateMachine(s, StreamPolicy("S")), 0)


def _pub(i: int, msg_id: str | None = None) -> bytes:
    hdr = f"NATS/1.0\r\nNats-Msg-Id: {msg_id}\r\n\r\n".encode() if msg_id else None
    return encode_op(StreamMsg((Publish("s", hdr, b"%d" % i, T0 + i),)))


def _feed(r: ReplicatedStreamFSM) -> None:
    idx = 0
    for i in range(1, 21):
        idx += 1
        r.apply_at(_pub(i, f"m{i}"), idx)
    idx += 1
    r.apply_at(encode_op(DeleteMsg(5)), idx)
    idx += 1
    r.apply_at(encode_op(ConsumerAssign("D", config_bytes(CFG), 5, "C-R3F-x", 1)), idx)
    idx += 1
    r.apply_at(encode_op(ConsumerDelivered("D", (1, 2, 3, 4), T0)), idx)
    idx += 1
    r.apply_at(encode_op(ConsumerAcked("D", (1, 3), (1, 3), T0 + 1)), idx)


def test_snapshot_holds_state_not_messages_and_installs_with_a_hole() -> None:
    leader = _rfsm()
    _feed(leader)
    doc = leader.snapshot()
    assert len(doc) < 2000  # 20 messages of state, no payloads
    snap = decode_group_snapshot(doc)
    assert (snap.first_seq, snap.last_seq, snap.msgs, snap.deleted) == (1, 20, 19, ((5, 5),))
    assert [d[0] for d in snap.dedupe] == [f"m{i}" for i in range(1, 21)]

    follower = _rfsm()
    holes = []
    follower.on_hole = lambda: holes.append(1)
    follower.restore(io.BytesIO(doc))
    assert holes and not follower.can_apply() and not follower.can_lead()
    assert not follower.current
    # the consumer table came with it
    c = follower.consumers.entries["D"].fsm
    lc = leader.consumers.entries["D"].fsm
    assert c.state() == lc.state()
    assert c.floor_sseq == 1 and sorted(c.pending) == [2, 4]
    # dedupe came with it: a retry of m3 after the snapshot is a duplicate
    src, dst = leader.fsm.store, follower.fsm.store
    assert isinstance(src, MemoryStreamStore) and isinstance(dst, MemoryStreamStore)
    _copy(src, dst, snap.last_seq)
    follower.filled()
    assert follower.can_apply() and follower.can_lead()
    assert _contents(dst) == _contents(src)
    out_l = leader.apply_at(_pub(99, "m3"), 100)
    out_f = follower.apply_at(_pub(99, "m3"), 100)
    assert out_l == out_f
    assert leader.fsm.store.state() == follower.fsm.store.state()


def test_restore_over_a_store_at_the_snapshot_keeps_it() -> None:
    """A restart: the store's mark is at the snapshot; only the consumer table is installed."""
    leader = _rfsm()
    _feed(leader)
    doc = leader.snapshot()
    snap = decode_group_snapshot(doc)
    again = ReplicatedStreamFSM(StreamStateMachine(leader.fsm.store, StreamPolicy("S")), snap.index)
    again.restore(io.BytesIO(doc))
    assert again.current and again.installs == 0
    assert "D" in again.consumers.entries


def test_no_snapshot_while_replaying_past_entries() -> None:
    r = ReplicatedStreamFSM(StreamStateMachine(MemoryStreamStore(), StreamPolicy("S")), 10)
    with pytest.raises(Exception, match="replaying"):
        r.snapshot()


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(1, 60), max_size=15),
    st.integers(0, 60),
    st.integers(1, 50),
)
def test_follower_ends_equal_whatever_it_held(dels: list[int], have: int, batch: int) -> None:
    """Whatever prefix a follower's store holds, reconcile + catch-up make it equal."""
    leader = _rfsm()
    for i in range(1, 61):
        leader.apply_at(_pub(i), i)
    idx = 60
    for d in sorted(set(dels)):
        idx += 1
        leader.apply_at(encode_op(DeleteMsg(d)), idx)
    doc = leader.snapshot()
    fstore = _store(0)
    for i in range(1, have + 1):
        fstore.append("s", b"", b"%d" % i, T0 + i)
    follower = _rfsm(fstore)
    follower.restore(io.BytesIO(doc))
    src = leader.fsm.store
    assert isinstance(src, MemoryStreamStore)
    _copy(src, fstore, 60, msgs_max=batch)
    follower.filled()
    assert _contents(fstore) == _contents(src)
    assert fstore.state().msgs == src.state().msgs
