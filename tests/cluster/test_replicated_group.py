"""cluster.replicated: a replicated stream's group keeps the store's one owner (DESIGN rule 3)."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import trio
import trio.testing

from chaos.net import FakeNetwork
from cluster.ops import Publish, StreamMsg, StreamPolicy
from cluster.replicated import (
    MARK_INTERVAL_S,
    ReplicatedGroup,
    read_mark,
    restore_to_mark,
    write_mark,
)
from cluster.stream_fsm import StreamStateMachine
from raft.errors import RaftError
from store.file import FileStreamStore
from store.memory import MemoryStreamStore

T0 = 1_700_000_000 * 1_000_000_000


class ThreadRecordingStore(MemoryStreamStore):
    """A memory store that remembers which threads appended to it and synced it."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()

    def append(self, *args: Any, **kw: Any) -> Any:
        self.threads.add(threading.current_thread().name)
        return super().append(*args, **kw)

    def sync(self) -> None:
        self.threads.add(threading.current_thread().name)
        super().sync()


async def test_mark_loop_syncs_the_store_in_its_owner_thread(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Regression (chaos power-loss-all --target trijet --seed 1332073689): the applied-mark
    loop synced the file store in a worker thread while the Raft driver kept appending in the
    trio thread; the segment's write buffer was swapped under an append, the record was lost
    and later reads failed their checks (CorruptionError crc/index) on every replica."""
    mock_clock.autojump_threshold = 0.01
    net = FakeNetwork(1)
    ids = ["a", "b", "c"]
    stores = {n: ThreadRecordingStore() for n in ids}
    groups = {
        n: ReplicatedGroup(
            "S-R3F-test",
            n,
            ids,
            StreamStateMachine(stores[n], StreamPolicy("S")),
            stores[n],
            net.links(n),
            tmp_path / n,
            random.Random(n),
        )
        for n in ids
    }
    async with trio.open_nursery() as nursery:
        nursery.start_soon(net.run)
        for g in groups.values():
            await nursery.start(g.run)
        with trio.fail_after(30):
            await groups["a"].raft.wait_leader()
            for i in range(20):  # proposed on a (forwarded when a follows)
                op = StreamMsg((Publish("s", None, b"%d" % i, T0 + i),))
                await groups["a"].propose(op)
                await trio.sleep(MARK_INTERVAL_S / 4)
            for _ in range(100):  # every replica's mark catches up with the last apply
                if all(read_mark(tmp_path / n)[1] == 20 for n in ids):
                    break
                await trio.sleep(MARK_INTERVAL_S)
        nursery.cancel_scope.cancel()
    for n in ids:
        assert read_mark(tmp_path / n)[1] == 20
        assert stores[n].threads == {threading.main_thread().name}, (n, stores[n].threads)


# -- the applied mark against a damaged store ------------------------------------------------


def _file_store(d: Path) -> FileStreamStore:
    return FileStreamStore(d, segment_bytes_max=512)


def _group(n: str, ids: list[str], store: Any, net: FakeNetwork, d: Path) -> ReplicatedGroup:
    fsm = StreamStateMachine(store, StreamPolicy("S"))
    return ReplicatedGroup("S-R3F-test", n, ids, fsm, store, net.links(n), d, random.Random(n))


def _publish(store: FileStreamStore, n: int) -> None:
    fsm = StreamStateMachine(store, StreamPolicy("S"))
    for i in range(n):
        fsm.apply_op(StreamMsg((Publish("s", None, b"%d" % i, T0 + i),)))
    store.sync()


def test_store_beyond_the_mark_is_cut_back_to_it(tmp_path: Path) -> None:
    store = _file_store(tmp_path / "msgs")
    _publish(store, 30)
    write_mark(tmp_path / "raft", 20, 20, 20)
    g = _group("a", ["a"], store, FakeNetwork(1), tmp_path / "raft")
    assert store.state().last_seq == 20
    assert g.rfsm.skip_through == 20
    store.close()


def test_store_short_of_the_mark_is_rebuilt_from_the_journal(tmp_path: Path) -> None:
    """Regression (chaos corrupt-minority --target trijet --seed 1864753826): a follower's
    store lost data the mark said it held (a flipped bit, a cut file); entries up to the mark
    were skipped, so the replica kept a hole for ever (S1 on that node, S3)."""
    store = _file_store(tmp_path / "msgs")
    _publish(store, 10)
    write_mark(tmp_path / "raft", 25, 25, 25)  # the store once held 25
    g = _group("a", ["a"], store, FakeNetwork(1), tmp_path / "raft")
    assert store.state().last_seq == 0
    assert g.rfsm.skip_through == 0
    store.close()


def test_damaged_store_is_rebuilt_from_the_journal(tmp_path: Path) -> None:
    store = _file_store(tmp_path / "msgs")
    _publish(store, 40)
    store.close()
    write_mark(tmp_path / "raft", 40, 40, 40)
    seg = sorted((tmp_path / "msgs").glob("seg-*.tjs"))[-1]  # the tail: always verified
    data = bytearray(seg.read_bytes())
    data[len(data) // 3] ^= 0x10  # interior: valid records follow
    seg.write_bytes(bytes(data))
    store = _file_store(tmp_path / "msgs")
    assert not store.recovery_report.clean
    g = _group("a", ["a"], store, FakeNetwork(1), tmp_path / "raft")
    assert (store.state().last_seq, g.rfsm.skip_through) == (0, 0)
    store.close()


def test_unreadable_mark_rebuilds(tmp_path: Path) -> None:
    store = _file_store(tmp_path / "msgs")
    _publish(store, 10)
    (tmp_path / "raft").mkdir()
    (tmp_path / "raft" / "applied.json").write_text('{"index": 1')
    assert read_mark(tmp_path / "raft") == (0, 0, 0)
    g = _group("a", ["a"], store, FakeNetwork(1), tmp_path / "raft")
    assert (store.state().last_seq, g.rfsm.skip_through) == (0, 0)
    store.close()


async def test_a_replica_rebuilt_after_damage_holds_every_message_again(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Three replicas; one is stopped, its store cut short behind the mark, and restarted:
    it rebuilds from its journal and ends equal to the others."""
    mock_clock.autojump_threshold = 0.01
    net = FakeNetwork(2)
    ids = ["a", "b", "c"]
    stores = {n: _file_store(tmp_path / n / "msgs") for n in ids}
    groups = {n: _group(n, ids, stores[n], net, tmp_path / n / "raft") for n in ids}
    scopes: dict[str, trio.CancelScope] = {}

    async def member(n: str, *, task_status: trio.TaskStatus[None]) -> None:
        with trio.CancelScope() as scope:
            scopes[n] = scope
            await groups[n].run(task_status=task_status)

    def contents(n: str) -> list[tuple[int, bytes]]:
        st = stores[n]
        return [(m.seq, m.payload) for s in range(1, st.state().last_seq + 1) if (m := st.load(s))]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(net.run)
        for n in ids:
            await nursery.start(member, n)
        with trio.fail_after(60):
            await groups["a"].raft.wait_leader()
            for i in range(30):
                await groups["a"].propose(StreamMsg((Publish("s", None, b"%d" % i, T0 + i),)))
            for _ in range(200):  # c's mark reaches the last apply
                if read_mark(tmp_path / "c" / "raft")[1] == 30:
                    break
                await trio.sleep(MARK_INTERVAL_S)
            scopes["c"].cancel()
            await trio.testing.wait_all_tasks_blocked()
            stores["c"].truncate(12)  # lost behind the mark (as a cut segment file would)
            stores["c"].close()
            stores["c"] = _file_store(tmp_path / "c" / "msgs")
            groups["c"] = _group("c", ids, stores["c"], net, tmp_path / "c" / "raft")
            await nursery.start(member, "c")
            await groups["a"].propose(StreamMsg((Publish("s", None, b"after", T0 + 99),)))
            for _ in range(200):
                if stores["c"].state().last_seq == 31:
                    break
                await trio.sleep(MARK_INTERVAL_S)
        nursery.cancel_scope.cancel()
    assert contents("c") == contents("a") == contents("b")
    assert len(contents("c")) == 31
    for st in stores.values():
        st.close()


def test_a_removal_past_the_mark_rebuilds(tmp_path: Path) -> None:
    """Regression (chaos power-loss-all --target trijet --seed 1332073689): the KV bucket
    (one message per subject) diverged across replicas after power loss: a replica's store
    had made durable, past its mark, the removal of a key's previous revision; cut back to
    the mark it still lacked that revision, and the CAS entries after the mark, applied again
    over it, failed their expected-last-subject-sequence there while they had succeeded on
    the other replicas (different seqs, different values)."""
    store = _file_store(tmp_path / "msgs")
    _publish(store, 10)
    write_mark(tmp_path / "raft", 10, 10, 10)
    store.remove(4)  # past the mark: a limit, a delete, a work queue's ack
    _publish(store, 2)
    store.sync()
    assert restore_to_mark(store, tmp_path / "raft", "g") == 0
    assert store.state().last_seq == 0


def test_appends_past_the_mark_are_cut(tmp_path: Path) -> None:
    store = _file_store(tmp_path / "msgs")
    _publish(store, 10)
    store.remove(4)  # before the mark: part of it
    write_mark(tmp_path / "raft", 12, 10, 9)
    _publish(store, 5)
    assert restore_to_mark(store, tmp_path / "raft", "g") == 12
    st = store.state()
    assert (st.last_seq, st.msgs) == (10, 9)


def test_an_old_mark_without_a_count_still_cuts(tmp_path: Path) -> None:
    store = _file_store(tmp_path / "msgs")
    _publish(store, 10)
    (tmp_path / "raft").mkdir()
    (tmp_path / "raft" / "applied.json").write_text('{"index": 7, "last_seq": 6}')
    assert restore_to_mark(store, tmp_path / "raft", "g") == 7
    assert store.state().last_seq == 6


def _kv_fsm(store: FileStreamStore) -> StreamStateMachine:
    from store.limits import StreamLimits

    return StreamStateMachine(store, StreamPolicy("KV", StreamLimits(max_msgs_per_subject=1)))


def _cas(key: str, last: int, value: int) -> StreamMsg:
    from cluster.headers import encode_headers

    hdr = encode_headers([("Nats-Expected-Last-Subject-Sequence", str(last))])
    return StreamMsg((Publish(key, hdr, b"%d" % value, T0 + value),))


def test_kv_replica_restored_to_its_mark_applies_like_the_others(tmp_path: Path) -> None:
    """The power-loss-all seed 1332073689 divergence in miniature: CAS increments on a bucket
    that keeps one message per key; a replica crashes with a removal made durable past its
    mark, restarts, applies the entries after its mark again, and must end as the replica that
    never crashed."""
    entries = []
    last: dict[str, int] = {}
    ref = _file_store(tmp_path / "ref")
    fsm = _kv_fsm(ref)
    for i in range(12):  # the history every replica applies (and its seqs)
        key = f"k{i % 2}"
        op = _cas(key, last.get(key, 0), i)
        entries.append(op)
        out = fsm.apply_op(op)
        last[key] = out.results[0].seq
    store = _file_store(tmp_path / "b")
    b = _kv_fsm(store)
    for op in entries[:8]:
        b.apply_op(op)
    st = store.state()
    write_mark(tmp_path / "raft", 8, st.last_seq, st.msgs)
    for op in entries[8:10]:  # past the mark, durable: k0/k1's older revisions removed
        b.apply_op(op)
    store.sync()
    store.close()
    store = _file_store(tmp_path / "b")  # restart
    skip = restore_to_mark(store, tmp_path / "raft", "g")
    b = _kv_fsm(store)
    b.recover_from_store()
    for i, op in enumerate(entries, 1):
        if i > skip:
            b.apply_op(op)

    def kv(s: FileStreamStore) -> list[tuple[int, str, bytes]]:
        out = []
        for seq in range(1, s.state().last_seq + 1):
            try:
                m = s.load(seq)
            except Exception:
                continue
            out.append((m.seq, m.subject, m.payload))
        return out

    assert kv(store) == kv(ref)
    store.close()
    ref.close()


# -- compaction by state snapshot, catch-up by streaming the store --------------------------


def _small(g: ReplicatedGroup) -> ReplicatedGroup:
    g.journal_entries_max = 20  # compact early: the journal is cut long before the stream
    return g


async def test_compacted_journal_catch_up_through_the_store(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The journal is compacted behind a state snapshot; a follower stopped meanwhile and a
    brand-new empty peer both come back through the leader's store (not the journal), message
    for message equal, and a restart after compaction re-applies nothing."""
    # real fsyncs run in threads: on a loaded machine a short threshold lets mock time
    # run ahead of them (elections, catch-up timeouts); a longer one keeps it honest
    mock_clock.autojump_threshold = 0.03
    net = FakeNetwork(3)
    ids = ["a", "b", "c"]
    stores = {n: _file_store(tmp_path / n / "msgs") for n in ids}
    groups = {n: _small(_group(n, ids, stores[n], net, tmp_path / n / "raft")) for n in ids}
    scopes: dict[str, trio.CancelScope] = {}
    dirs = {n: tmp_path / n for n in ids}

    ended: dict[str, trio.Event] = {}

    async def member(n: str, *, task_status: trio.TaskStatus[None]) -> None:
        ended[n] = trio.Event()
        try:
            with trio.CancelScope() as scope:
                scopes[n] = scope
                await groups[n].run(task_status=task_status)
        finally:
            ended[n].set()

    async def stop(n: str) -> None:
        """Cancel member ``n`` and wait until every task of it is gone (its links too)."""
        scopes[n].cancel()
        await ended[n].wait()

    def contents(n: str) -> list[tuple[int, bytes]]:
        return [(m.seq, m.payload) for m in stores[n].load_run(1, 10**9)]

    async def publish(lo: int, hi: int) -> None:
        """Each message once, retried across leader changes (its msg id dedupes)."""
        for i in range(lo, hi):
            hdr = b"NATS/1.0\r\nNats-Msg-Id: m%d\r\n\r\n" % i
            op = StreamMsg((Publish("s", hdr, b"%d" % i, T0 + i),))
            for _ in range(100):
                await until(lambda: any(g.is_leader for g in groups.values()))
                leader = next(g for g in groups.values() if g.is_leader)
                try:
                    await leader.propose(op)
                    break
                except RaftError:
                    await trio.sleep(MARK_INTERVAL_S)
            else:
                raise AssertionError(f"message {i} never committed")

    async def until(cond: Any) -> None:
        for _ in range(2000):  # mock time: a bounded wait for the condition
            if cond():
                return
            await trio.sleep(MARK_INTERVAL_S)
        raise AssertionError("condition not reached")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(net.run)
        for n in ids:
            await nursery.start(member, n)
        with trio.fail_after(600):
            await groups["a"].raft.wait_leader()
            await publish(0, 10)
            victim = next(n for n in ids if not groups[n].is_leader)
            await stop(victim)
            await publish(10, 200)
            live = [n for n in ids if n != victim]
            # every live replica compacted: its journal holds far fewer entries than the stream
            await until(lambda: all(groups[n].status()["first_index"] > 100 for n in live))
            stores[victim].close()
            stores[victim] = _file_store(tmp_path / victim / "msgs")
            groups[victim] = _small(
                _group(victim, ids, stores[victim], net, tmp_path / victim / "raft")
            )
            await nursery.start(member, victim)
            await publish(200, 210)
            await until(lambda: stores[victim].state().last_seq == 210)
            st = groups[victim].status()["catchup"]
            assert st["done"] >= 1 and st["msgs"] >= 90, st  # through the store, not the log
            assert st["current"]
            assert groups[victim].raft.status()["snapshots_installed"] >= 1
            # a brand-new, empty replica in a follower's place catches up by itself
            new = next(n for n in ids if not groups[n].is_leader)
            await stop(new)
            stores[new].close()
            dirs[new] = tmp_path / "new"
            stores[new] = _file_store(dirs[new] / "msgs")
            groups[new] = _small(_group(new, ids, stores[new], net, dirs[new] / "raft"))
            await nursery.start(member, new)
            await publish(210, 220)
            await until(lambda: stores[new].state().last_seq == 220)
            assert groups[new].status()["catchup"]["done"] >= 1
            # every replica's applied mark reaches the end before they stop
            await until(lambda: all(read_mark(dirs[n] / "raft")[1] == 220 for n in ids))
        nursery.cancel_scope.cancel()
    assert contents("a") == contents("b") == contents("c")
    assert [p for _, p in contents("a")] == [b"%d" % i for i in range(220)]
    # restart from snapshot + journal: nothing applied twice
    for n in ids:
        stores[n].close()
        stores[n] = _file_store(dirs[n] / "msgs")
        g = _group(n, ids, stores[n], FakeNetwork(4), dirs[n] / "raft")
        assert stores[n].state().last_seq == 220, n
        assert g.rfsm.skip_through > 100
        stores[n].close()
