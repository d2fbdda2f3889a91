"""Interval mode (the user's ``sync_interval``): batches are answered without a
sync and the store is synced on the stream's timer; the default syncs each
batch before answering.  Syncs are counted with a fake; time is trio's mock
clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from cluster.local import LocalGroup
from cluster.model import StreamConfig
from cluster.stream_fsm import PubResult
from cluster.stream_registry import StreamRegistry
from cluster.streams import Stream
from store.api import SyncPolicy
from store.file import FileStreamStore
from store.memory import MemoryStreamStore


class _Fsm:
    def __init__(self) -> None:
        self.applied: list[Any] = []

    def apply(self, entry: Any) -> Any:
        self.applied.append(entry)
        return len(self.applied)


async def test_interval_group_answers_without_syncing_then_syncs_on_request() -> None:
    fsm = _Fsm()
    synced_at: list[int] = []  # how much was applied when each sync ran
    group = LocalGroup("g", fsm, lambda: synced_at.append(len(fsm.applied)), sync_each_batch=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(group.run)
        assert [await group.propose(i) for i in range(3)] == [1, 2, 3]
        assert synced_at == [] and group.syncs == 0
        await group.sync()
        assert synced_at == [3] and group.syncs == 1
        assert await group.propose(9) == 4
        await group.sync()
        assert synced_at == [3, 4]
        nursery.cancel_scope.cancel()


async def test_interval_sync_waits_for_the_batch_in_progress() -> None:
    fsm = _Fsm()
    synced_at: list[int] = []
    group = LocalGroup(
        "g",
        fsm,
        lambda: synced_at.append(len(fsm.applied)),
        sync_each_batch=False,
        sync_in_thread=False,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(group.run)
        results: list[int] = []

        async def propose(i: int) -> None:
            results.append(await group.propose(i))

        for i in range(5):
            nursery.start_soon(propose, i)
        await trio.testing.wait_all_tasks_blocked()
        await group.sync()
        assert sorted(results) == [1, 2, 3, 4, 5]
        assert synced_at == [5]
        nursery.cancel_scope.cancel()


async def test_default_group_syncs_every_batch() -> None:
    fsm = _Fsm()
    synced_at: list[int] = []
    group = LocalGroup("g", fsm, lambda: synced_at.append(len(fsm.applied)))
    async with trio.open_nursery() as nursery:
        await nursery.start(group.run)
        for i in range(3):
            await group.propose(i)
        assert synced_at == [1, 2, 3] and group.syncs == 3
        nursery.cancel_scope.cancel()


class _CountingStore(FileStreamStore):
    """A file store whose syncs are counted (and the state they covered)."""

    synced: list[int]

    def sync(self) -> None:
        super().sync()
        self.synced.append(self.state().last_seq)


def _results() -> tuple[list[Any], trio.Event, Any]:
    got: list[Any] = []
    done = trio.Event()

    def cb(result: Any) -> None:
        got.append(result)
        if len(got) == 3:
            done.set()

    return got, done, cb


class _LazyMemoryStore(MemoryStreamStore):
    """A memory store that asks for interval syncs (synced inline, so the
    mock clock sees every step) and counts them."""

    synced: list[int]

    @property
    def sync_policy(self) -> SyncPolicy:
        return SyncPolicy.INTERVAL

    @property
    def sync_interval_s(self) -> float:
        return 5.0

    def sync(self) -> None:
        self.synced.append(self.state().last_seq)


async def test_stream_in_interval_mode_syncs_within_the_interval(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = _LazyMemoryStore()
    store.synced = []
    stream = Stream(StreamConfig(name="S", subjects=("s",)), store, 0)
    got, done, cb = _results()
    async with trio.open_nursery() as nursery:
        await nursery.start(stream.run)
        for i in range(3):
            stream.offer("s", None, b"%d" % i, cb)
        with trio.fail_after(1):
            await done.wait()
        assert got == [PubResult("S", 1), PubResult("S", 2), PubResult("S", 3)]
        assert store.synced == []  # acknowledged, not yet synced
        await trio.sleep(5.5)
        assert store.synced == [3]  # everything acknowledged, synced by the timer
        stream.offer("s", None, b"x", None)
        await trio.sleep(5)
        assert store.synced == [3, 4]
        nursery.cancel_scope.cancel()


async def test_stream_by_default_syncs_before_acknowledging(tmp_path: Path) -> None:
    store = _CountingStore(tmp_path / "s")
    store.synced = []
    stream = Stream(StreamConfig(name="S", subjects=("s",)), store, 0)
    seen_synced: list[list[int]] = []
    got, done, cb = _results()

    def on_result(result: Any) -> None:
        seen_synced.append(list(store.synced))  # what was durable when it was answered
        cb(result)

    async with trio.open_nursery() as nursery:
        await nursery.start(stream.run)
        for i in range(3):
            stream.offer("s", None, b"%d" % i, on_result)
        with trio.fail_after(5):
            await done.wait()
        assert all(s and s[-1] >= r.seq for s, r in zip(seen_synced, got, strict=True))
        nursery.cancel_scope.cancel()
    store.close()


def test_registry_opens_interval_stores_only_when_configured(tmp_path: Path) -> None:
    reg = StreamRegistry(str(tmp_path), None)  # type: ignore[arg-type]  # no tasks started
    cfg = StreamConfig(name="A", subjects=("a",))
    default = reg._open_store(cfg)
    assert default.sync_policy is SyncPolicy.ALWAYS
    default.close()
    reg.sync_interval_s = 2.5
    lazy = reg._open_store(StreamConfig(name="B", subjects=("b",)))
    assert (lazy.sync_policy, lazy.sync_interval_s) == (SyncPolicy.INTERVAL, 2.5)
    lazy.close()
