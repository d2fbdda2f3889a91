"""Inline batches: ``LocalGroup.start``/``finish`` and ``Stream.offer(defer=…)``
+ ``Stream.drain`` (a capturer applies a chunk's publishes in its own task).

The promises checked: a result is handed out only once its batch is durable
(memory: at once; file: after the sync thread's sync), batches stay one at a
time (a busy group leaves the queue to the stream's task), and order and
sequence numbers are the same as through the task.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import pytest
import trio
import trio.testing

from cluster.local import LocalGroup
from cluster.model import StreamConfig
from cluster.stream_fsm import ApiErrorResult, PubResult
from cluster.streams import Stream
from raft.errors import InvariantViolation
from store.file import FileStreamStore
from store.memory import MemoryStreamStore


class Recorder:
    def __init__(self) -> None:
        self.applied: list[bytes] = []
        self.synced = 0

    def apply(self, entry: bytes) -> object:
        if entry == b"boom":
            raise RuntimeError("invariant")
        self.applied.append(entry)
        return len(self.applied)

    def snapshot(self) -> bytes:
        return b""

    def restore(self, reader: BinaryIO) -> None:
        pass


def _never(p: object) -> None:
    raise AssertionError("no sync thread: resolved at once")


async def test_start_without_sync_thread_is_resolved_at_once() -> None:
    fsm = Recorder()
    syncs: list[int] = []

    def sync() -> None:
        syncs.append(len(fsm.applied))
        fsm.synced = len(fsm.applied)

    g = LocalGroup("s", fsm, sync, sync_in_thread=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(g.run)
        assert g.idle
        p = g.start(b"a", _never)
        assert p.done.is_set() and p.result == 1 and p.error is None
        assert syncs == [1] and g.idle  # synced before the result, next batch may start
        bad = g.start(b"boom", _never)
        assert isinstance(bad.error, RuntimeError) and g.idle
        assert await g.propose(b"b") == 2  # the ordinary path goes on
        nursery.cancel_scope.cancel()
    assert g.status()["applied"] == 3


async def test_start_with_sync_thread_resolves_when_durable_and_holds_others() -> None:
    fsm = Recorder()
    started, release = threading.Event(), threading.Event()

    def sync() -> None:
        started.set()
        release.wait(5)
        fsm.synced = len(fsm.applied)

    g = LocalGroup("t", fsm, sync)
    got: list[object] = []
    other_done, durable = trio.Event(), trio.Event()
    seen: list[tuple[object, int]] = []

    def on_durable(p: Any) -> None:
        seen.append((p.result, fsm.synced))
        durable.set()

    async def other() -> None:
        got.append(await g.propose(b"b"))
        other_done.set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(g.run)
            p = g.start(b"a", on_durable)
            assert fsm.applied == [b"a"] and not p.done.is_set()
            assert not g.idle
            with pytest.raises(InvariantViolation):
                g.start(b"c", on_durable)  # one batch at a time
            nursery.start_soon(other)
            await trio.to_thread.run_sync(started.wait, 5)
            await trio.testing.wait_all_tasks_blocked()
            assert fsm.applied == [b"a"] and not got and not seen  # "b" waits its turn
            release.set()
            await durable.wait()
            assert p.done.is_set() and seen == [(1, 1)]  # resolved once synced
            await other_done.wait()
            nursery.cancel_scope.cancel()
    assert got == [2] and fsm.synced == 2


async def test_a_failed_sync_reaches_on_durable() -> None:
    def sync() -> None:
        raise OSError("disk gone")

    g = LocalGroup("s", Recorder(), sync)
    done = trio.Event()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(g.run)
            p = g.start(b"x", lambda _: done.set())
            await done.wait()
            assert isinstance(p.error, OSError) and g.idle
            nursery.cancel_scope.cancel()


class _Deferred:
    """Stands in for ``Router.defer``/``flush``: collects calls, runs them on ``flush``."""

    def __init__(self) -> None:
        self.fns: list[Callable[[], None]] = []

    def __call__(self, fn: Callable[[], None]) -> None:
        self.fns.append(fn)

    def flush(self) -> None:
        fns, self.fns = self.fns, []
        for fn in fns:
            fn()


def _memory_stream() -> Stream:
    cfg = StreamConfig(name="S", subjects=("s.>",))
    return Stream(cfg, MemoryStreamStore(cfg.limits()), created_ns=1)


async def test_memory_drain_acks_in_the_callers_task() -> None:
    stream = _memory_stream()
    defer = _Deferred()
    results: list[Any] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(stream.run)
        for i in range(3):
            assert stream.offer("s.a", None, b"%d" % i, results.append, defer)
        assert len(defer.fns) == 1  # one drain per routed batch
        assert not results
        defer.flush()
        # applied and answered synchronously, in order, as one batch
        assert [r.seq for r in results] == [1, 2, 3]
        assert all(isinstance(r, PubResult) for r in results)
        assert stream.group.status()["batches"] == 1
        nursery.cancel_scope.cancel()


async def test_drain_while_busy_leaves_the_batch_to_the_task() -> None:
    stream = _memory_stream()
    defer = _Deferred()
    results: list[Any] = []
    got_all = trio.Event()

    def on_result(r: Any) -> None:
        results.append(r)
        if len(results) == 2:
            got_all.set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            stream.group._busy = True  # another batch is in progress
            assert stream.offer("s.a", None, b"x", on_result, defer)
            defer.flush()
            assert not results  # not applied here: the group is busy
            stream.group._busy = False
            stream.group._wake.set()
            assert stream.offer("s.a", None, b"y", on_result)  # the task takes both
            await got_all.wait()
            nursery.cancel_scope.cancel()
    assert [r.seq for r in results] == [1, 2]


async def test_file_drain_acks_only_after_the_sync(tmp_path: Path) -> None:
    cfg = StreamConfig(name="F", subjects=("f.>",))
    store = FileStreamStore(tmp_path, cfg.limits())
    real_sync = store.sync
    synced: list[int] = []
    release = threading.Event()

    def slow_sync() -> None:
        release.wait(5)
        real_sync()
        synced.append(store.state().last_seq)

    store.sync = slow_sync  # type: ignore[method-assign]
    stream = Stream(cfg, store, created_ns=1)
    defer = _Deferred()
    results: list[Any] = []
    done = trio.Event()

    def on_result(r: Any) -> None:
        assert synced and synced[-1] >= r.seq  # durable before the ack
        results.append(r)
        if len(results) == 3:
            done.set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            for i in range(2):
                stream.offer("f.a", None, b"%d" % i, on_result, defer)
            defer.flush()
            assert store.state().last_seq == 2 and not results  # applied, not yet acked
            stream.offer("f.a", None, b"late", on_result, defer)
            defer.flush()  # the group is busy syncing: the task takes it later
            assert store.state().last_seq == 2
            await trio.testing.wait_all_tasks_blocked()
            assert not results
            release.set()
            await done.wait()
            nursery.cancel_scope.cancel()
    assert [r.seq for r in results] == [1, 2, 3]
    store.close()


async def test_drain_failure_answers_503() -> None:
    stream = _memory_stream()
    defer = _Deferred()
    results: list[Any] = []

    def broken(op: object) -> object:
        raise OSError("store failed")

    async with trio.open_nursery() as nursery:
        await nursery.start(stream.run)
        stream.group._apply = broken
        stream.offer("s.a", None, b"x", results.append, defer)
        defer.flush()
        nursery.cancel_scope.cancel()
    assert len(results) == 1 and isinstance(results[0], ApiErrorResult)
    assert (results[0].code, results[0].err_code) == (503, 10077)


async def test_offer_run_answers_through_reply_acks_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``offer_run`` (a publisher's run in one call): each publish queued with its
    reply; the batch's results go to ``reply_acks`` in order, a publish without a
    reply gets none, callbacks queued between keep their place, and what does not
    fit the queue is refused (the count returned)."""
    import cluster.streams as streams_mod

    stream = _memory_stream()
    defer = _Deferred()
    calls: list[tuple[list[bytes], list[int]]] = []
    seen: list[Any] = []

    def acks(replies: list[bytes], results: list[Any]) -> None:
        calls.append((list(replies), [r.seq for r in results]))
        seen.append("acks")

    async with trio.open_nursery() as nursery:
        await nursery.start(stream.run)
        replies: list[bytes | None] = [b"r1", None, b"r3"]
        assert stream.offer_run("s.a", replies, [b"a", b"b", b"c"], acks, defer) == 3
        assert stream.offer("s.a", None, b"d", lambda r: seen.append(r.seq), defer)
        assert stream.offer_run("s.a", [b"r5", b"r6"], [b"e", b"f"], acks, defer) == 2
        assert stream.offer_run("s.a", [b"r7"], [b"g"], None, defer) == 1  # no_ack
        assert len(defer.fns) == 1
        defer.flush()
        assert calls == [([b"r1", b"r3"], [1, 3]), ([b"r5", b"r6"], [5, 6])]
        assert seen == ["acks", 4, "acks"]
        assert stream.store.state().last_seq == 7
        monkeypatch.setattr(streams_mod, "QUEUE_MSGS_MAX", 2)
        stream.group._busy = True  # the queue fills
        assert stream.offer_run("s.a", [b"x", b"y", b"z"], [b"1", b"2", b"3"], acks, defer) == 2
        assert stream.offer_run("s.a", [b"w"], [b"4"], acks, defer) == 0
        assert stream.rejected == 2
        nursery.cancel_scope.cancel()
