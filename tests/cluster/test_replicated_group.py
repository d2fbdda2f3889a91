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
from cluster.replicated import MARK_INTERVAL_S, ReplicatedGroup, read_mark
from cluster.stream_fsm import StreamStateMachine
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
