"""Stream groups compact their journal by state snapshots and fill holes from peers' stores.

Pure units (``cluster.replica_state`` codec, ``cluster.catchup.read_batch`` bounds, the
store reconcile) and three in-process groups over the fake network: the journal stays
bounded, a follower stopped past the bound (or wiped) catches up through the store path,
and a restart from snapshot + journal keeps every guarantee.
"""

from __future__ import annotations

import io
import random
import shutil
from pathlib import Path
from typing import Any

import cbor2
import pytest
import trio
import trio.testing

from chaos.net import FakeNetwork
from cluster.catchup import read_batch
from cluster.consumer_table import ConsumerTable
from cluster.ops import (
    ConsumerAcked,
    ConsumerDelivered,
    DeleteMsg,
    Publish,
    StreamMsg,
    StreamPolicy,
    encode_op,
)
from cluster.replica_state import (
    ReplicaState,
    ReplicaStateError,
    StoreShape,
    decode_replica_state,
    encode_replica_state,
    finish,
    install_batch,
    live_in,
    ranges,
    reconcile,
    shape_of,
)
from cluster.replicated import ReplicatedGroup, ReplicatedStreamFSM
from cluster.stream_fsm import StreamStateMachine
from store.file import FileStreamStore
from store.limits import StreamLimits
from store.memory import MemoryStreamStore
from tests.cluster.test_consumer_table import _assign, _ops, _state

T0 = 1_700_000_000 * 1_000_000_000
WINDOW = StreamPolicy(name="S", duplicate_window_ns=10**15)


def _pub(i: int, *, msg_id: bool = True, size: int = 8) -> Publish:
    hdr = f"NATS/1.0\r\nNats-Msg-Id: m{i}\r\n\r\n".encode() if msg_id else None
    return Publish(f"s.{i % 3}", hdr, str(i).encode() + b"x" * size, T0 + i)


def _contents(store: Any) -> list[tuple[int, str, bytes]]:
    st = store.state()
    out = []
    seq = st.first_seq
    while True:
        run = store.load_run(seq, 100)
        if not run:
            return out
        out += [(m.seq, m.subject, m.payload) for m in run]
        seq = run[-1].seq + 1


# -- the codec -------------------------------------------------------------------------


def _machine() -> tuple[ReplicatedStreamFSM, MemoryStreamStore]:
    store = MemoryStreamStore(StreamLimits())
    rfsm = ReplicatedStreamFSM(StreamStateMachine(store, WINDOW), 0)
    for i in range(1, 21):
        rfsm.apply_at(encode_op(StreamMsg((_pub(i),))), i)
    for seq in (3, 4, 5, 9):
        rfsm.fsm.apply_op(DeleteMsg(seq, erase=False))
    for k, op in enumerate(_ops(), start=21):
        rfsm.apply_at(encode_op(op), k)
    return rfsm, store


def test_state_snapshot_round_trips_without_the_messages() -> None:
    rfsm, store = _machine()
    data = rfsm.snapshot()
    rs = decode_replica_state(data)
    assert rs.index == rfsm.applied == 20 + len(_ops())
    assert rs.shape == shape_of(store)
    assert rs.shape.deleted == ((3, 5), (9, 9)) and rs.shape.msgs == 16
    assert b"x" * 8 not in data  # no payload travels
    assert encode_replica_state(rs) == data
    # a fresh replica takes it: consumers exact, stream state (dedupe) exact, hole opened
    fresh_store = MemoryStreamStore(StreamLimits())
    fresh = ReplicatedStreamFSM(StreamStateMachine(fresh_store, StreamPolicy(name="S")), 0)
    holes: list[int] = []
    fresh.on_hole = lambda: holes.append(1)
    fresh.restore(io.BytesIO(data))
    assert _state(fresh.consumers) == _state(rfsm.consumers)
    a, b = rfsm.consumers.entries["D"].fsm, fresh.consumers.entries["D"].fsm
    assert (a.rdq, a.lss, a.rdc, a.started) == (b.rdq, b.lss, b.rdc, b.started)
    assert fresh.fsm.replica_state() == rfsm.fsm.replica_state()
    assert fresh.hole is not None and holes == [1] and not fresh.may_lead and fresh.apply_held
    assert fresh.snapshot() == data  # a replica with a hole gives the snapshot it installed


def test_restore_in_place_keeps_the_consumer_objects() -> None:
    rfsm, _ = _machine()
    data = rfsm.snapshot()
    t = ConsumerTable()
    t.apply(_assign())
    t.apply(_assign("GONE"))
    fsm_before = t.entries["D"].fsm
    heard: list[tuple[str, str]] = []
    t.listeners.append(lambda ev, n: heard.append((ev, n)))
    t.restore_doc(decode_replica_state(data).consumers)
    assert t.entries["D"].fsm is fsm_before
    assert _state(t) == _state(rfsm.consumers)
    assert heard == [("removed", "GONE"), ("updated", "D")]


@pytest.mark.parametrize(
    "mangle",
    [
        lambda d: d[:-3],
        lambda d: b"\xa0",
        lambda d: d.replace(b"index", b"indey"),
    ],
)
def test_malformed_state_snapshots_are_refused(mangle: Any) -> None:
    rfsm, _ = _machine()
    with pytest.raises(ReplicaStateError):
        decode_replica_state(mangle(rfsm.snapshot()))


def test_bad_deleted_ranges_are_refused() -> None:
    rs = ReplicaState(5, StoreShape(1, 10, 0, 8, 0, ((4, 3),)), {}, [])
    with pytest.raises(ReplicaStateError):
        decode_replica_state(encode_replica_state(rs))
    rs = ReplicaState(5, StoreShape(1, 10, 0, 8, 0, ((4, 11),)), {}, [])
    with pytest.raises(ReplicaStateError):
        decode_replica_state(encode_replica_state(rs))


def test_ranges_and_live_counts() -> None:
    assert ranges([2, 3, 4, 7, 9, 10]) == ((2, 4), (7, 7), (9, 10))
    sh = StoreShape(2, 10, 0, 6, 0, ((3, 4), (8, 8)))
    assert live_in(sh, 1, 10) == 6
    assert live_in(sh, 4, 8) == 3
    assert live_in(sh, 11, 20) == 0


# -- batches and the store side ------------------------------------------------------------


def _source(n: int = 300, size: int = 1000) -> MemoryStreamStore:
    src = MemoryStreamStore(StreamLimits())
    for i in range(1, n + 1):
        src.append(f"s.{i % 5}", b"", f"{i:05d}".encode() + b"y" * size, T0 + i)
    for seq in range(40, 60):
        src.remove(seq)
    src.compact(7)
    return src


def test_batches_are_bounded_by_count_and_bytes_and_cover_the_range() -> None:
    src = _source()
    seen: list[int] = []
    nxt, end = 1, 250
    batches = 0
    while nxt <= end:
        msgs, after = read_batch(src, nxt, end, 64, 16 * 1024)
        assert len(msgs) <= 64
        assert sum(len(m.payload) for m in msgs) <= 16 * 1024 + 1100  # one message over at most
        assert after > nxt
        seen += [m.seq for m in msgs]
        nxt = after
        batches += 1
    want = [seq for seq in range(7, 251) if not 40 <= seq < 60]
    assert seen == want
    assert batches >= len(want) * 1000 // (16 * 1024)
    # one message larger than the byte bound still travels (alone)
    msgs, after = read_batch(src, 7, end, 64, 10)
    assert [m.seq for m in msgs] == [7] and after == 8


def test_reconcile_install_finish_bring_a_store_to_the_shape() -> None:
    src = _source()
    shape = shape_of(src)
    dst = MemoryStreamStore(StreamLimits())
    for i in range(1, 51):  # an old copy: holds messages since deleted and compacted away
        m = src.load(i) if 7 <= i and not 40 <= i < 60 else None
        dst.append(f"s.{i % 5}", b"", m.payload if m else b"old", T0 + i)
    nxt = reconcile(dst, shape)
    assert nxt == 51 and dst.state().first_seq == 7
    while nxt <= shape.last_seq:
        msgs, nxt = read_batch(src, nxt, shape.last_seq, 32, 8 * 1024)
        install_batch(dst, msgs, shape.last_seq)
    finish(dst, shape)
    assert _contents(dst) == _contents(src)
    assert shape_of(dst) == shape


def test_reconcile_refetches_a_store_that_lost_a_message() -> None:
    src = _source(100)
    dst = MemoryStreamStore(StreamLimits())
    for m in src.load_run(7, 20):
        if m.seq > dst.state().last_seq + 1:
            dst.skip(m.seq - 1)
        dst.append(m.subject, m.headers, m.payload, m.ts_ns, seq=m.seq)
    dst.remove(10)  # lost: the shape has it live
    assert reconcile(dst, shape_of(src)) == 7
    assert dst.state().msgs == 0


# -- three groups ------------------------------------------------------------------------------


def _file_store(d: Path) -> FileStreamStore:
    return FileStreamStore(d, segment_bytes_max=4096)


class Trio:
    """Three replicas of one stream group over the fake network, restartable."""

    def __init__(self, tmp: Path, nursery: trio.Nursery, *, entries_max: int = 20) -> None:
        self.tmp = tmp
        self.nursery = nursery
        self.net = FakeNetwork(3)
        nursery.start_soon(self.net.run)
        self.ids = ["a", "b", "c"]
        self.entries_max = entries_max
        self.stores: dict[str, FileStreamStore] = {}
        self.groups: dict[str, ReplicatedGroup] = {}
        self.scopes: dict[str, trio.CancelScope] = {}

    async def start(self, n: str) -> None:
        self.stores[n] = _file_store(self.tmp / n / "msgs")
        store = self.stores[n]
        self.groups[n] = ReplicatedGroup(
            "S-R3F-test",
            n,
            self.ids,
            StreamStateMachine(store, WINDOW),
            store,
            self.net.links(n),
            self.tmp / n / "raft",
            random.Random(n),
            journal_entries_max=self.entries_max,
        )
        g = self.groups[n]
        g.rfsm.fsm.recover_from_store()  # as cluster.streams.Stream does

        async def member(*, task_status: trio.TaskStatus[None]) -> None:
            with trio.CancelScope() as scope:
                self.scopes[n] = scope
                await g.run(task_status=task_status)

        await self.nursery.start(member)

    async def stop(self, n: str) -> None:
        self.scopes[n].cancel()
        await trio.testing.wait_all_tasks_blocked()
        self.stores[n].close()

    async def leader(self) -> ReplicatedGroup:
        while True:
            for n, g in self.groups.items():
                if n in self.scopes and not self.scopes[n].cancel_called and g.is_leader:
                    return g
            await trio.sleep(0.05)

    async def until(self, pred: Any) -> None:
        """Wait (mock clock: virtual time) until ``pred()``; the test's fail_after bounds it."""
        for _ in range(100_000):
            if pred():
                return
            await trio.sleep(0.05)


async def test_a_follower_behind_the_compacted_journal_catches_up_from_the_store(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.01
    async with trio.open_nursery() as nursery:
        t = Trio(tmp_path, nursery)
        for n in t.ids:
            await t.start(n)
        with trio.fail_after(120):
            lead = await t.leader()
            await lead.propose(_assign())
            for i in range(1, 11):
                await lead.propose(StreamMsg((_pub(i),)))
            follower = next(n for n in t.ids if n != lead.node_id)
            await t.until(lambda: t.stores[follower].state().last_seq == 10)
            await t.stop(follower)
            for i in range(11, 71):  # three times the journal's bound
                await lead.propose(StreamMsg((_pub(i),)))
            await lead.propose(DeleteMsg(12, erase=False))
            await lead.propose(ConsumerDelivered("D", (1, 2, 3), T0))
            await lead.propose(ConsumerAcked("D", (1,), (1,), T0))
            await t.until(lambda: lead.status()["first_index"] > 20)
            assert lead.status()["journal_entries"] <= 2 * t.entries_max
            assert lead.status()["snapshots_taken"] >= 1
            await t.start(follower)
            g = t.groups[follower]
            await t.until(lambda: g.catchup.stats.catchups == 1)
            await lead.propose(StreamMsg((_pub(71),)))
            await t.until(lambda: t.stores[follower].state().last_seq == 71)
            assert g.catchup.stats.fetched_msgs >= 55
            assert _contents(t.stores[follower]) == _contents(lead.store)
            assert _state(g.rfsm.consumers) == _state(lead.rfsm.consumers)
            assert g.rfsm.fsm.replica_state() == lead.rfsm.fsm.replica_state()
        nursery.cancel_scope.cancel()
    for s in t.stores.values():
        s.close()


async def test_a_wiped_replica_joins_empty_and_catches_up(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A brand-new empty replica (its store and journal gone) fills itself from a peer."""
    mock_clock.autojump_threshold = 0.01
    async with trio.open_nursery() as nursery:
        t = Trio(tmp_path, nursery)
        for n in t.ids:
            await t.start(n)
        with trio.fail_after(120):
            lead = await t.leader()
            for i in range(1, 61):
                await lead.propose(StreamMsg(tuple(_pub(10 * i + k, size=2000) for k in range(10))))
            await t.until(lambda: lead.status()["first_index"] > 20)
            victim = next(n for n in t.ids if n != lead.node_id)
            await t.stop(victim)
            shutil.rmtree(tmp_path / victim)
            await t.start(victim)
            g = t.groups[victim]
            await t.until(lambda: g.catchup.stats.catchups == 1)
            await t.until(lambda: t.stores[victim].state().last_seq == 600)
            stats = g.catchup.stats
            assert stats.fetched_msgs >= 400 and stats.batches >= 2  # the rest: the journal
            assert _contents(t.stores[victim]) == _contents(lead.store)
        nursery.cancel_scope.cancel()
    for s in t.stores.values():
        s.close()


async def test_restart_from_snapshot_and_journal_applies_nothing_twice(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.01
    async with trio.open_nursery() as nursery:
        t = Trio(tmp_path, nursery)
        for n in t.ids:
            await t.start(n)
        with trio.fail_after(120):
            lead = await t.leader()
            await lead.propose(_assign())
            for i in range(1, 51):
                await lead.propose(StreamMsg((_pub(i),)))
            await lead.propose(ConsumerDelivered("D", (1, 2, 3, 4), T0))
            await lead.propose(ConsumerAcked("D", (2,), (2,), T0))
            await t.until(lambda: all(t.stores[n].state().last_seq == 50 for n in t.ids))
            await t.until(lambda: all(t.groups[n].status()["first_index"] > 1 for n in t.ids))
            applied = lead.rfsm.applied
            await t.until(lambda: all(t.groups[n].rfsm.applied == applied for n in t.ids))
            before = {
                n: (_contents(t.stores[n]), _state(t.groups[n].rfsm.consumers)) for n in t.ids
            }
            await trio.sleep(1)  # marks written
            for n in t.ids:
                await t.stop(n)
            for n in t.ids:
                await t.start(n)
            lead = await t.leader()
            dup = await lead.propose(StreamMsg((_pub(50),)))  # a retried id: still a duplicate
            assert dup.results[0].duplicate
            for n in t.ids:
                await t.until(lambda n=n: t.groups[n].rfsm.applied >= lead.rfsm.applied)
                assert (_contents(t.stores[n]), _state(t.groups[n].rfsm.consumers)) == before[n]
                assert t.groups[n].catchup.stats.catchups == 0
        nursery.cancel_scope.cancel()
    for s in t.stores.values():
        s.close()


def test_catch_up_answers_round_trip_and_malformed_ones_are_refused() -> None:
    from cluster.catchup import _decode_msgs, _encode_msgs

    src = _source(80, 10)
    msgs, _ = read_batch(src, 1, 80, 100, 1 << 20)
    assert _decode_msgs(cbor2.loads(cbor2.dumps(_encode_msgs(msgs)))) == msgs
    for bad in (
        [[2, "s", b"", b"", 1], [2, "s", b"", b"", 1]],  # not ascending
        [[1, "", b"", b"", 1]],  # empty subject
        [[1, "s", "text", b"", 1]],  # headers not bytes
        [[1, "s", b""]],  # short
        "nope",
    ):
        with pytest.raises(ValueError):
            _decode_msgs(bad)


def test_a_store_failing_under_an_apply_marks_the_replica_damaged() -> None:
    import errno

    class FailingStore(MemoryStreamStore):
        full = False

        def append(self, *a: Any, **kw: Any) -> Any:
            if self.full:
                raise OSError(errno.ENOSPC, "no space left on device")
            return super().append(*a, **kw)

    store = FailingStore(StreamLimits())
    rfsm = ReplicatedStreamFSM(StreamStateMachine(store, WINDOW), 0)
    told: list[int] = []
    rfsm.on_damaged = lambda: told.append(1)
    rfsm.apply_at(encode_op(StreamMsg((_pub(1),))), 1)
    assert rfsm.may_lead
    store.full = True
    with pytest.raises(OSError):
        rfsm.apply_at(encode_op(StreamMsg((_pub(2),))), 2)
    assert rfsm.damaged and not rfsm.may_lead and told == [1]
    assert rfsm.applied == 1  # the mark never passes the failed entry
    with pytest.raises(Exception, match="damaged"):
        rfsm.snapshot()  # and no snapshot describes the damaged store
