"""A leader's own fsync off the commit path: the followers' durable copies are the majority.

Synchronous cores (the first five tests) or the trio driver with
``leader_write_overlap`` (the last).  Synchronous members on a fake clock with hand-delivered messages (no threads,
no sockets), so every interleaving is chosen by the test: the leader's cycle
sends its append-entries and leaves its journal records unsynced (its write
"in flight", as ``raft.driver`` lets it be), the followers persist and answer.
"""

from __future__ import annotations

import random

import trio
import trio.testing

from chaos.toyfsm import ToyStateMachine
from raft.config import RaftConfig
from raft.core import RaftCore
from raft.proposal import Proposal
from raft.storage import MemoryDisk
from tests.raft.cluster_helpers import Cluster, Member

IDS = ["a", "b", "c"]


class Harness:
    """Members whose messages the test routes; ``cycle`` syncs unless told not to."""

    def __init__(self) -> None:
        self.t = 0.0
        self.disks = {i: MemoryDisk() for i in IDS}
        self.cores: dict[str, RaftCore | None] = {}
        #: per destination: (source, payload) waiting to be delivered
        self.queued: dict[str, list[tuple[str, bytes]]] = {i: [] for i in IDS}
        for i in IDS:
            self.start(i)

    def start(self, nid: str) -> RaftCore:
        core = RaftCore(
            "g",
            nid,
            IDS,
            ToyStateMachine(),
            self.disks[nid],
            RaftConfig(),
            now=lambda: self.t,
            rng=random.Random(nid),
            first_candidate="a",
        )
        self.cores[nid] = core
        return core

    def core(self, nid: str) -> RaftCore:
        c = self.cores[nid]
        assert c is not None
        return c

    def crash(self, nid: str) -> None:
        """Process and power gone: what was not fsynced is lost."""
        self.disks[nid].crash()
        self.cores[nid] = None
        self.queued[nid].clear()

    def cycle(self, nid: str, *, sync: bool = True, to: set[str] | None = None) -> None:
        """One driver cycle of ``nid``: its queued messages in, its messages out
        (to ``to`` only, if given; the rest are lost)."""
        core = self.core(nid)
        for src, payload in self.queued[nid]:
            core.receive(src, payload)
        self.queued[nid].clear()
        ready = core.cycle()
        self._send(nid, ready.early_outbox, to)
        if sync:
            ready.sync()
            self._send(nid, ready.outbox, to)
        else:
            assert not ready.outbox, "only append-entries may leave before the fsync"
        ready.release()

    def _send(self, src: str, out: list[tuple[str, bytes]], to: set[str] | None) -> None:
        for peer, payload in out:
            if (to is None or peer in to) and self.cores.get(peer) is not None:
                self.queued[peer].append((src, payload))

    def settle(self, rounds: int = 200) -> None:
        for _ in range(rounds):
            self.t += 0.01
            for nid in IDS:
                if self.cores[nid] is not None:
                    self.cycle(nid)

    def elect_a(self) -> RaftCore:
        self.settle(20)
        a = self.core("a")
        assert a.is_leader and a.leader_ready
        return a


def values(core: RaftCore) -> list[bytes]:
    fsm = core.fsm
    assert isinstance(fsm, ToyStateMachine)
    return fsm.values


def propose_unsynced(h: Harness, leader: RaftCore, data: bytes) -> Proposal:
    """The leader appends ``data`` and sends it; its own write stays in flight."""
    p = leader.propose(data)
    h.cycle(leader.node_id, sync=False)
    assert leader.journal.durable_index < leader.journal.last_index
    return p


def test_two_followers_commit_while_the_leaders_write_is_in_flight() -> None:
    h = Harness()
    a = h.elect_a()
    p = propose_unsynced(h, a, b"x")
    idx = a.journal.last_index
    h.cycle("b")
    h.cycle("c")  # both persist and answer
    h.cycle("a", sync=False)
    assert p.done and p.error is None and p.result == 1
    assert a.commit_index >= idx > a.journal.durable_index
    assert values(a) == [b"x"]
    assert a.commits_before_own_write > 0


def test_one_follower_and_the_leaders_unsynced_copy_are_no_majority() -> None:
    h = Harness()
    a = h.elect_a()
    p = propose_unsynced(h, a, b"x")
    idx = a.journal.last_index
    h.queued["c"].clear()  # c never hears of it
    h.cycle("b")
    h.cycle("a", sync=False)
    assert not p.done and a.commit_index < idx  # b alone is not a majority
    h.cycle("a")  # the leader's write lands: a and b are
    h.cycle("a", sync=False)
    assert p.done and p.error is None and a.commit_index >= idx


def test_without_the_cap_one_follower_would_commit_it() -> None:
    # the check above has teeth: the seeded bug commits on b's answer alone
    h = Harness()
    a = h.elect_a()
    a.cap_own_unsynced = False
    p = propose_unsynced(h, a, b"x")
    h.queued["c"].clear()
    h.cycle("b")
    h.cycle("a", sync=False)
    assert p.done and a.commit_index > a.journal.durable_index


def test_leader_crash_before_its_own_fsync_loses_nothing_acknowledged() -> None:
    h = Harness()
    a = h.elect_a()
    acked = [propose_unsynced(h, a, b"m%d" % i) for i in range(3)]
    h.cycle("b")
    h.cycle("c")
    h.cycle("a", sync=False)
    assert all(p.done and p.error is None for p in acked)
    assert a.journal.durable_index < a.journal.last_index
    h.crash("a")  # before its fsync: its disk never had the entries
    h.t += 1.0  # b and c elect a new leader among themselves
    h.settle(200)
    new = next(h.core(n) for n in ("b", "c") if h.core(n).is_leader)
    assert values(new) == [b"m0", b"m1", b"m2"]
    later = new.propose(b"after")
    h.settle(20)
    assert later.done and later.error is None
    restarted = h.start("a")  # comes back without the entries, gets them from the leader
    assert restarted.journal.last_index < new.journal.last_index
    h.settle(200)
    for n in IDS:
        assert values(h.core(n)) == [b"m0", b"m1", b"m2", b"after"], n


def test_leader_crash_with_one_follower_copy_never_acknowledged() -> None:
    # the leader's copy in flight + b's: not committed, so not acknowledged; the
    # entry may survive (b has it) or not, but nothing acknowledged is lost
    h = Harness()
    a = h.elect_a()
    done = propose_unsynced(h, a, b"ok")
    h.cycle("b")
    h.cycle("c")
    h.cycle("a")
    assert done.done and done.error is None
    p = propose_unsynced(h, a, b"maybe")
    h.queued["c"].clear()
    h.cycle("b")
    h.cycle("a", sync=False)
    assert not p.done
    h.crash("a")
    h.t += 1.0
    h.settle(200)
    h.start("a")
    h.settle(300)
    logs = {n: values(h.core(n)) for n in IDS}
    assert all(v[:1] == [b"ok"] for v in logs.values()), logs
    assert len({tuple(v) for v in logs.values()}) == 1, logs  # the replicas agree


async def test_driver_overlap_keeps_acked_proposals_through_power_loss(
    mock_clock: trio.testing.MockClock,
) -> None:
    # the trio driver with the overlap on (writes inline, in a task of their
    # own): proposals acknowledged while leaders' writes were in flight survive
    # every member losing its un-fsynced bytes at once, twice
    rng = random.Random(3)
    config = RaftConfig(leader_write_overlap=True)
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, IDS, seed=3, config=config)
        await c.start()
        acked: dict[bytes, object] = {}
        overlapped = 0
        for round_ in range(2):
            leader = await c.wait_leader()

            async def one(i: int, leader: Member = leader, round_: int = round_) -> None:
                v = b"r%d-%d" % (round_, i)
                acked[v] = await leader.g.propose(v)

            for burst in range(5):
                async with trio.open_nursery() as inner:
                    for i in range(10):
                        inner.start_soon(one, burst * 10 + i)
            overlapped += leader.g.status()["background_writes"]
            for m in c.live():
                await m.crash(lose_unsynced=False)
            for m in c.members.values():
                m.disk.crash(rng)
            for m in c.members.values():
                await m.start()
        assert overlapped > 0  # the leaders' writes went on without the driver waiting
        leader = await c.wait_leader()
        await leader.g.propose(b"final")
        with trio.fail_after(10):
            await c.wait_applied(len(acked) + 1)
        for m in c.live():
            values = m.g.core.fsm.values  # type: ignore[attr-defined]
            for v, pos in acked.items():
                assert values[pos - 1] == v  # type: ignore[operator]
        nursery.cancel_scope.cancel()
