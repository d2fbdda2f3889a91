"""LocalGroup: batched apply, one sync per batch, results only after the sync."""

from __future__ import annotations

from typing import BinaryIO

import pytest
import trio

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
