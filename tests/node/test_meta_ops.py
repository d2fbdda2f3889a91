"""META.LEADER.STEPDOWN and SERVER.REMOVE through their narrow seam (``node.jetstream.meta_ops``).

The reference answers these only for system-account users (reference §4.2, §5.3); until
accounts exist they are not routed, so they are tested here as the functions an authorised
request calls: a fake meta layer whose ``propose`` applies entries to a real ``MetaMachine``
(the decisions are apply's) and whose Raft side records what it was asked.  Answers are
compared with the reference's texts as observed (``reference/jetstream-cluster.md``).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import trio

from cluster.meta import MetaMachine, PeerRecord, add_stream_entry, peer_entry
from cluster.naming import peer_id
from cluster.placement import PeerSpec
from node.jetstream.meta_ops import meta_leader_stepdown, server_remove
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


STEPDOWN = "io.nats.jetstream.api.v1.meta_leader_stepdown_response"
REMOVE = "io.nats.jetstream.api.v1.meta_server_remove_response"


def _err(type_: str, code: int, err_code: int, description: str) -> dict[str, Any]:
    return {
        "type": type_,
        "error": {"code": code, "err_code": err_code, "description": description},
    }


def test_stepdown_answers_and_hands_over() -> None:
    m = _meta()
    assert json.loads(_run(meta_leader_stepdown, m, b"")) == {"type": STEPDOWN, "success": True}
    assert m.stepped == [None]  # any current member
    body = b'{"placement":{"tags":["az:2"]}}'
    assert json.loads(_run(meta_leader_stepdown, m, body))["success"] is True
    assert m.stepped[-1] == "n2"
    body = b'{"placement":{"preferred":"n3"}}'
    assert json.loads(_run(meta_leader_stepdown, m, body))["success"] is True
    assert m.stepped[-1] == "n3"


def test_stepdown_refusals_as_the_reference() -> None:
    m = _meta()
    cases = [
        (b'{"placement":{"preferred":"n1"}}', 'preferred server "n1" is already leader'),
        (b'{"placement":{"preferred":"zz"}}', 'preferred server "zz" not known'),
        (b'{"placement":{"cluster":"C9"}}', "no replacement peer connected"),
    ]
    for body, description in cases:
        got = json.loads(_run(meta_leader_stepdown, m, body))
        assert got == _err(STEPDOWN, 400, 10005, description), body
    assert m.stepped == []
    assert json.loads(_run(meta_leader_stepdown, m, b"{"))["error"]["err_code"] == 10025


def test_only_the_meta_leader_answers() -> None:
    m = _meta()
    m.is_leader = False
    assert _run(meta_leader_stepdown, m, b"") is None
    assert _run(server_remove, m, b'{"peer":"n2"}') is None


def test_server_remove_moves_assets_and_the_seat() -> None:
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
    victim = m.machine.streams["R2"].peers[-1]
    if victim == "n1":  # the fake meta leader keeps its seat: pick the other member
        victim = m.machine.streams["R2"].peers[0]
    got = json.loads(_run(server_remove, m, json.dumps({"peer_id": peer_id(victim)}).encode()))
    assert got == {"type": REMOVE, "success": True}
    assert victim not in m.machine.peers
    assert victim not in m.machine.streams["R2"].peers
    assert len(m.machine.streams["R2"].peers) == 2  # the spare took its place
    assert m.group.removed == [victim]


def test_server_remove_refusals_as_the_reference() -> None:
    m = _meta()
    assert json.loads(_run(server_remove, m, b"")) == _err(REMOVE, 400, 10003, "bad request")
    assert json.loads(_run(server_remove, m, b"{}")) == _err(REMOVE, 400, 10003, "bad request")
    for body in (b'{"peer":"n9"}', b'{"peer_id":"zzzzzzzz"}'):
        assert json.loads(_run(server_remove, m, body)) == _err(
            REMOVE, 400, 10044, "server is not a member of the cluster"
        )
    bad = json.loads(_run(server_remove, m, b'{"peer":"n2","x":1}'))
    assert bad["error"]["err_code"] == 10025
    m.refuse = True  # not committed: no reply, nothing removed
    assert _run(server_remove, m, b'{"peer":"n2"}') is None
    assert "n2" in m.machine.peers and m.group.removed == []
