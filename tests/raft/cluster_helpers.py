"""In-process Raft groups over FakePeerLinks, for trio tests."""

from __future__ import annotations

import random
from collections.abc import Callable

import trio

from chaos.net import FakeNetwork, Faults
from chaos.toyfsm import ToyStateMachine
from raft.config import RaftConfig
from raft.group import RaftGroup
from raft.storage import MemoryDisk


class Member:
    def __init__(self, cluster: Cluster, node_id: str, peers: list[str]) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.peers = peers
        self.disk = MemoryDisk()
        self.group: RaftGroup | None = None
        self.scope: trio.CancelScope | None = None

    @property
    def g(self) -> RaftGroup:
        assert self.group is not None
        return self.group

    async def start(self) -> None:
        c = self.cluster
        links = c.net.links(self.node_id)
        links.up = True
        self.group = RaftGroup(
            c.group_id,
            self.node_id,
            self.peers,
            c.fsm_factory(),
            links,
            self.disk,
            c.config,
            rng=random.Random(f"{c.seed}-{self.node_id}-{c.starts}"),
            fsync_in_thread=False,
        )
        c.starts += 1
        self.scope = await c.nursery.start(self._run)

    async def _run(self, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        assert self.group is not None
        async with trio.open_nursery() as n:
            await n.start(self.group.run)
            task_status.started(n.cancel_scope)

    async def crash(self, lose_unsynced: bool = True) -> None:
        assert self.scope is not None
        self.cluster.net.links(self.node_id).up = False
        self.scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        if lose_unsynced:
            self.disk.crash()


class Cluster:
    def __init__(
        self,
        nursery: trio.Nursery,
        ids: list[str],
        *,
        seed: int = 1,
        config: RaftConfig | None = None,
        faults: Faults | None = None,
        fsm_factory: Callable[[], object] = ToyStateMachine,
        group_id: str = "g1",
    ) -> None:
        self.nursery = nursery
        self.seed = seed
        self.group_id = group_id
        self.config = config or RaftConfig()
        self.net = FakeNetwork(seed, faults)
        self.fsm_factory = fsm_factory
        self.starts = 0
        self.members = {i: Member(self, i, [p for p in ids if p != i]) for i in ids}

    async def start(self) -> None:
        await self.nursery.start(self.net.run)
        for m in self.members.values():
            await m.start()

    def live(self) -> list[Member]:
        return [
            m for m in self.members.values() if m.scope is not None and not m.scope.cancel_called
        ]

    async def wait_leader(self, exclude: set[str] = frozenset()) -> Member:  # type: ignore[assignment]
        while True:
            for m in self.live():
                if m.node_id not in exclude and m.g.is_leader:
                    return m
            await trio.sleep(0.01)

    async def wait_applied(self, count: int, members: list[Member] | None = None) -> None:
        while True:
            ms = members or self.live()
            if all(len(m.g.core.fsm.values) >= count for m in ms):  # type: ignore[attr-defined]
                return
            await trio.sleep(0.01)
