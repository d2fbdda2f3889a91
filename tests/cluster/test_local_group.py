"""LocalGroup: batched apply, one sync per batch, results only after the sync."""

from __future__ import annotations

import threading
import time
from typing import BinaryIO

import pytest
import trio
import trio.testing

from cluster.local import LocalGroup
from raft.errors import QueueFull


class Recorder:
    def __init__(self) -> None:
        self.applied: list[bytes] = []
        self.synced = 0  # entries covered by a sync

    def apply(self, entry: bytes) -> object:
        if entry == b"boom":
            raise RuntimeError("invariant")
        self.applied.append(entry)
        return len(self.applied)

    def snapshot(self) -> bytes:
        return b""

    def restore(self, reader: BinaryIO) -> None:
        pass


async def test_results_after_sync_in_batches() -> None:
    fsm = Recorder()
    syncs: list[int] = []

    def sync() -> None:
        syncs.append(len(fsm.applied))
        fsm.synced = len(fsm.applied)

    g = LocalGroup("s", fsm, sync, sync_in_thread=False)
    results: dict[int, object] = {}

    async def one(i: int) -> None:
        r = await g.propose(b"%d" % i)
        assert fsm.synced >= int(r)  # durable before the proposer hears
        results[i] = r

    async with trio.open_nursery() as nursery:
        await nursery.start(g.run)
        async with trio.open_nursery() as inner:
            for i in range(100):
                inner.start_soon(one, i)
        nursery.cancel_scope.cancel()
    assert sorted(results.values()) == list(range(1, 101))  # type: ignore[type-var]
    assert len(syncs) < 100  # batched: far fewer syncs than proposals
    assert g.status()["applied"] == 100


async def test_apply_failure_reaches_the_proposer_and_queue_is_bounded() -> None:
    g = LocalGroup("s", Recorder(), lambda: None, sync_in_thread=False, pending_max=1)
    async with trio.open_nursery() as nursery:
        await nursery.start(g.run)
        with pytest.raises(RuntimeError):
            await g.propose(b"boom")
        g._pending.append(object())  # type: ignore[arg-type]  # simulate a full queue
        with pytest.raises(QueueFull):
            await g.propose(b"x")
        g._pending.clear()
        nursery.cancel_scope.cancel()


async def test_sync_thread_group_commit_with_object_entries() -> None:
    """The sync runs in the group's own thread, once per batch, before any result."""
    import threading

    fsm = Recorder()
    sync_threads: set[str] = set()
    syncs: list[int] = []

    def sync() -> None:
        sync_threads.add(threading.current_thread().name)
        syncs.append(len(fsm.applied))
        fsm.synced = len(fsm.applied)
        # an fsync takes time: proposals that arrive meanwhile form the next
        # batch (without it a loaded machine could run 200 one-entry batches)
        time.sleep(0.002)

    seen: list[object] = []

    def apply(entry: object) -> object:
        seen.append(entry)
        return fsm.apply(b"x")

    g = LocalGroup("s", fsm, sync, apply=apply)
    results: list[int] = []

    async def one(i: int) -> None:
        r = await g.propose(("op", i))
        assert fsm.synced >= int(r)  # type: ignore[call-overload]
        results.append(int(r))  # type: ignore[call-overload]

    async with trio.open_nursery() as nursery:
        await nursery.start(g.run)
        async with trio.open_nursery() as inner:
            for i in range(200):
                inner.start_soon(one, i)
        nursery.cancel_scope.cancel()
    assert sorted(results) == list(range(1, 201))
    assert sorted(seen) == [("op", i) for i in range(200)]  # type: ignore[type-var]
    assert sync_threads == {"sync-s"}
    assert len(syncs) < 200
    assert syncs == sorted(syncs) and syncs[-1] == 200


async def test_cancelled_driver_finishes_its_sync_and_others_get_results() -> None:
    fsm = Recorder()
    started = trio.Event()
    release = trio.Event()
    token = trio.lowlevel.current_trio_token()

    def sync() -> None:
        token.run_sync_soon(started.set)
        trio.from_thread.run(release.wait, trio_token=token)
        fsm.synced = len(fsm.applied)

    g = LocalGroup("s", fsm, sync)
    got: list[object] = []
    other_done = trio.Event()
    cs = trio.CancelScope()

    async def driver() -> None:
        with cs:
            await g.propose(b"a")  # the group is idle: drives its own batch

    async def other() -> None:
        got.append(await g.propose(b"b"))
        other_done.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(g.run)
        nursery.start_soon(driver)
        await started.wait()
        cs.cancel()  # the sync in progress is waited for, not abandoned
        nursery.start_soon(other)
        await trio.testing.wait_all_tasks_blocked()
        assert not got  # "b" waits for the next batch
        release.set()
        with trio.fail_after(5):
            await other_done.wait()
        nursery.cancel_scope.cancel()
    assert fsm.applied == [b"a", b"b"]
    assert got == [2] and fsm.synced == 2


async def test_sync_failure_reaches_the_driver() -> None:
    def sync() -> None:
        raise OSError("disk gone")

    g = LocalGroup("s", Recorder(), sync)
    async with trio.open_nursery() as nursery:
        await nursery.start(g.run)
        with pytest.raises(OSError, match="disk gone"):
            await g.propose(b"x")
        nursery.cancel_scope.cancel()


async def test_shutdown_while_a_proposer_drives_a_threaded_sync() -> None:
    """The group's driver is cancelled while a proposer's batch syncs in the
    thread: the sync completes, the proposer gets its result, nothing hangs."""
    fsm = Recorder()
    started, release = threading.Event(), threading.Event()

    def sync() -> None:
        started.set()
        release.wait(5)

    g = LocalGroup("t", fsm, sync, sync_in_thread=True)
    results: list[object] = []

    async def proposer() -> None:
        results.append(await g.propose(b"x"))

    with trio.fail_after(5):
        async with trio.open_nursery() as outer:
            run_scope = trio.CancelScope()

            async def run_group(task_status: trio.TaskStatus[None]) -> None:
                with run_scope:
                    await g.run(task_status=task_status)

            await outer.start(run_group)
            outer.start_soon(proposer)
            await trio.to_thread.run_sync(started.wait, 5)
            run_scope.cancel()  # shutdown: the driver's finally closes the sync thread
            await trio.testing.wait_all_tasks_blocked()
            release.set()
    assert results == [1]


async def test_lone_batches_sync_inline_once_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync publisher's lone batches: threaded until QUIET_BATCHES_MIN quiet
    ones, then synced inline (resolved on return) but for every
    INLINE_PROBE_EVERY-th; a proposer finding the group busy, or a slow inline
    sync, sends it back to the thread."""
    from cluster import local

    fsm = Recorder()
    thread_syncs: list[str] = []

    def sync() -> None:
        thread_syncs.append(threading.current_thread().name)

    monkeypatch.setattr(local, "_clock", lambda: 0.0)  # every inline sync fast
    g = LocalGroup("t", fsm, sync, sync_in_thread=True)

    async def one(entry: bytes) -> bool:
        """Start ``entry`` as a lone batch; whether it was synced inline."""
        durable = trio.Event()
        p = g.start(entry, lambda _p: durable.set(), lone=True)
        if p.done.is_set():
            return True
        await durable.wait()
        return False

    async with trio.open_nursery() as nursery:
        await nursery.start(g.run)
        ways = [await one(b"%d" % i) for i in range(local.QUIET_BATCHES_MIN)]
        assert ways == [False] * local.QUIET_BATCHES_MIN  # threaded while not known quiet
        ways = [await one(b"x") for _ in range(2 * local.INLINE_PROBE_EVERY)]
        assert ways.count(False) == 2  # the probes
        assert all(ways[: local.INLINE_PROBE_EVERY - 1])
        assert g.inline_syncs == 2 * local.INLINE_PROBE_EVERY - 2
        g.contended()  # somebody else proposed while a batch was in progress
        assert not await one(b"y")
        assert {await one(b"z") for _ in range(local.QUIET_BATCHES_MIN - 1)} == {False}
        assert await one(b"w")
        # a slow inline sync: back to the thread, twice the quiet streak needed
        readings = iter([0.0, 1.0])
        monkeypatch.setattr(local, "_clock", lambda: next(readings))
        assert await one(b"slow")
        monkeypatch.setattr(local, "_clock", lambda: 0.0)
        ways = [await one(b"q") for _ in range(2 * local.QUIET_BATCHES_MIN + 1)]
        assert ways[:-1] == [False] * 2 * local.QUIET_BATCHES_MIN and ways[-1]
        nursery.cancel_scope.cancel()
    assert len(fsm.applied) == g.applied == g.syncs
    assert thread_syncs.count("sync-t") == g.syncs - g.inline_syncs
