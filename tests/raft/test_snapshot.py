"""A follower 100,000 entries behind catches up through a snapshot (log compaction)."""

from __future__ import annotations

import random

from chaos.net import decode_one_frame
from chaos.toyfsm import CountingStateMachine
from raft.config import RaftConfig
from raft.core import RaftCore
from raft.storage import MemoryDisk
from raft.wire import encode_frame

IDS = ["a", "b", "c"]
ENTRIES = 100_000


class Harness:
    """Synchronous members with instant delivery (no faults) on a fake clock."""

    def __init__(self, config: RaftConfig) -> None:
        self.t = 0.0
        self.config = config
        self.disks = {i: MemoryDisk() for i in IDS}
        self.cores: dict[str, RaftCore | None] = {}
        self.wire: list[tuple[str, str, bytes]] = []
        for i in IDS:
            self.start(i)

    def start(self, nid: str) -> None:
        self.cores[nid] = RaftCore(
            "g",
            nid,
            IDS,
            CountingStateMachine(),
            self.disks[nid],
            self.config,
            now=lambda: self.t,
            rng=random.Random(nid),
        )

    def step(self, dt: float = 0.01) -> None:
        self.t += dt
        wire, self.wire = self.wire, []
        for src, dst, frame in wire:
            core = self.cores.get(dst)
            if core is not None:
                core.receive(src, decode_one_frame(frame)[1])
        for nid, core in self.cores.items():
            if core is None:
                continue
            for _ in range(4):
                ready = core.cycle()
                for peer, payload in ready.early_outbox:
                    self.wire.append((nid, peer, encode_frame("g", payload)))
                ready.sync()
                for peer, payload in ready.outbox:
                    self.wire.append((nid, peer, encode_frame("g", payload)))
                ready.release()
                if not ready.more:
                    break

    def leader(self) -> RaftCore:
        for _ in range(1000):
            for c in self.cores.values():
                if c is not None and c.is_leader:
                    return c
            self.step()
        raise AssertionError("no leader")


def test_follower_100k_entries_behind_catches_up_via_snapshot() -> None:
    cfg = RaftConfig(
        batch_proposals_max=1,  # one Raft entry per proposal
        proposals_pending_max=ENTRIES + 10,
        log_compaction_entries_min=20_000,
        log_compaction_s_min=1e9,
    )
    h = Harness(cfg)
    leader = h.leader()
    lagging = next(i for i in IDS if i != leader.node_id)
    h.cores[lagging] = None  # down while the others commit 100k entries
    props = [leader.propose(b"%d" % i) for i in range(ENTRIES)]
    for _ in range(5000):
        h.step()
        if all(p.done for p in props):
            break
    assert all(p.error is None for p in props)
    assert leader.last_applied >= ENTRIES
    # the leader's log was compacted: the lagging member cannot be fed entries
    assert leader.snapshots.taken >= 1
    assert leader.journal.first_index > 1000
    h.start(lagging)
    follower = h.cores[lagging]
    assert follower is not None
    for _ in range(3000):
        h.step()
        if follower.last_applied >= leader.last_applied:
            break
    assert follower.snapshots.installed >= 1
    assert follower.fsm.count == leader.fsm.count == ENTRIES  # type: ignore[attr-defined]
    assert follower.fsm.chain == leader.fsm.chain  # type: ignore[attr-defined]
    # and it keeps replicating normally afterwards
    p = leader.propose(b"after")
    for _ in range(100):
        h.step()
    assert p.error is None and p.result == ENTRIES + 1
    assert follower.fsm.count == ENTRIES + 1  # type: ignore[attr-defined]
