"""META.LEADER.STEPDOWN and SERVER.REMOVE through their narrow seam (``node.jetstream.meta_ops``).

The reference answers these only for system-account users (reference §4.2, §5.3); until
accounts exist they are not routed, so they are tested here as the functions an authorised
request calls: a fake meta layer whose ``propose`` applies entries to a real ``MetaMachine``
(the decisions are apply's) and whose Raft side records what it was asked.  Answers are
compared with the reference's texts as observed (``reference/jetstream-cluster.md``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import trio

from cluster.meta import MetaMachine, PeerRecord, add_stream_entry, peer_entry
from cluster.naming import peer_id
from cluster.placement import PeerSpec
from node.jetstream.meta_ops import remap_server
from raft.errors import NotLeader

TAGS = {"n1": ("az:1", "ssd"), "n2": ("az:2",), "n3": ("az:3",)}


@dataclass
class FakeGroup:
    members: list[str]
    removed: list[str] = field(default_factory=list)

    async def remove_member(self, name: str, timeout_s: float | None = None) -> None:
        self.removed.append(name)


@dataclass
class FakeMeta:
    name: str = "n1"
    is_leader: bool = True
    unique_tag: str = ""
    machine: MetaMachine = field(default_factory=MetaMachine)
    rng: random.Random = field(default_factory=lambda: random.Random(1))
    group: FakeGroup = field(default_factory=lambda: FakeGroup(["n1", "n2", "n3"]))
    stepped: list[str | None] = field(default_factory=list)
    up: tuple[str, ...] = ("n1", "n2", "n3")
    refuse: bool = False

    def specs(self, names: list[str]) -> list[PeerSpec]:
        return [PeerSpec(n, "C1", TAGS[n], n in self.up, 0) for n in names]

    def online(self) -> list[str]:
        return list(self.up)

    def step_down_soon(self, target: str | None) -> None:
        self.stepped.append(target)

    async def propose(self, entry: bytes) -> object:
        if self.refuse:
            raise NotLeader("lost the lead")
        return self.machine.apply(entry)


def _meta() -> FakeMeta:
    m = FakeMeta()
    for n in ("n1", "n2", "n3"):
        m.machine.apply(peer_entry(PeerRecord(n, "C1", TAGS[n])))
    return m


def _run(fn: Any, *args: Any) -> Any:
    return trio.run(fn, *args)


REMOVE = "io.nats.jetstream.api.v1.meta_server_remove_response"


def test_server_remove_moves_assets() -> None:
    m = _meta()
    entry = add_stream_entry(
        {"name": "R2", "subjects": ["r2"], "num_replicas": 2},
        group="S-R2F-abcdefgh",
        created_ns=1,
        seed=2,
        online=["n1", "n2", "n3"],
        unique_tag="",
        reply="",
    )
    m.machine.apply(entry)
    victim = m.machine.stream("R2").peers[-1]
    assert _run(remap_server, m, victim) is None
    assert victim not in m.machine.peers
    assert victim not in m.machine.stream("R2").peers
    assert len(m.machine.stream("R2").peers) == 2  # the spare took its place
    assert peer_id(victim)  # named as the reference names peers


def test_server_remove_not_committed_raises() -> None:
    m = _meta()
    m.refuse = True  # not committed: nothing changes
    try:
        _run(remap_server, m, "n2")
    except NotLeader:
        pass
    else:
        raise AssertionError("a lost lead must surface")
    assert "n2" in m.machine.peers
