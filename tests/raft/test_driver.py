"""raft.driver under trio's MockClock: event-driven cycles, group commit, send after fsync."""

from __future__ import annotations

import random

import trio
import trio.testing

from chaos.net import FakeNetwork
from chaos.toyfsm import ToyStateMachine
from raft.errors import ProposalDropped
from raft.group import RaftGroup
from raft.proposal import Proposal
from raft.storage import MemoryDisk
from tests.raft.cluster_helpers import Cluster

IDS = ["a", "b", "c"]


async def test_single_member_commits_without_waiting_for_a_timer(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = FakeNetwork()
    disk = MemoryDisk()
    g = RaftGroup("solo", "a", [], ToyStateMachine(), net.links("a"), disk, fsync_in_thread=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(g.run)
        await g.wait_leader()
        t0 = trio.current_time()
        assert await g.propose(b"x") == 1
        assert await g.propose(b"y") == 2
        assert trio.current_time() == t0  # no timer involved: event-driven
        assert disk.durable["solo.journal"]  # and it is on "disk"
        nursery.cancel_scope.cancel()
    # after the group stops, proposals are refused
    try:
        await g.propose(b"z")
    except ProposalDropped as e:
        assert not e.maybe_committed
    else:
        raise AssertionError("expected ProposalDropped")


async def test_idle_group_wakes_only_for_heartbeats(mock_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, IDS)
        await c.start()
        leader = await c.wait_leader()
        await leader.g.propose(b"x")
        cycles0 = {m.node_id: m.g._driver.cycles for m in c.live()}  # type: ignore[union-attr]
        await trio.sleep(10.0)
        hb = c.config.heartbeat_s
        beats = 10.0 / hb
        for m in c.live():
            n = m.g._driver.cycles - cycles0[m.node_id]  # type: ignore[union-attr]
            if m is leader:  # its heartbeat timer + one per follower response
                assert n <= 3 * beats + 5, n
            else:  # one per append-entries received, nothing else
                assert n <= beats + 5, n
        nursery.cancel_scope.cancel()


class CheckingLinks:
    """Wraps FakePeerLinks; asserts nothing is sent while the journal has un-synced records."""

    def __init__(self, inner, owner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.owner = owner
        self.node_id = inner.node_id
        self.sends = 0
        self.early = 0

    def register(self, gid, h):  # type: ignore[no-untyped-def]
        self.inner.register(gid, h)

    def unregister(self, gid):  # type: ignore[no-untyped-def]
        self.inner.unregister(gid)

    def send(self, peer, gid, payload):  # type: ignore[no-untyped-def]
        if self.owner.core.journal.dirty:
            # only a leader's append-entries may leave before the fsync
            from raft.wire import decode_messages

            types = {m["type"] for m in decode_messages(payload)}
            assert types == {"append_entries"} and self.owner.core.is_leader, (
                f"{types} sent before its journal records were fsynced"
            )
            self.early += 1
        self.sends += 1
        return self.inner.send(peer, gid, payload)


async def test_nothing_leaves_before_the_fsync_and_one_fsync_per_cycle(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = FakeNetwork(3)
    groups, links, disks = [], [], []
    async with trio.open_nursery() as nursery:
        await nursery.start(net.run)
        for i in IDS:
            disk = MemoryDisk()
            holder: dict = {}
            lk = CheckingLinks(net.links(i), None)
            g = RaftGroup(
                "g",
                i,
                [p for p in IDS if p != i],
                ToyStateMachine(),
                lk,  # type: ignore[arg-type]
                disk,
                rng=random.Random(i),
                fsync_in_thread=False,
            )
            lk.owner = g
            del holder
            groups.append(g)
            links.append(lk)
            disks.append(disk)
            await nursery.start(g.run)
        leader = await groups[0].wait_leader()
        lg = next(g for g in groups if g.node_id == leader)

        async def one(i: int) -> None:
            await lg.propose(b"%d" % i)

        async with trio.open_nursery() as inner:
            for i in range(300):
                inner.start_soon(one, i)
        for g, d in zip(groups, disks, strict=True):
            assert d.syncs <= g._driver.cycles  # type: ignore[union-attr]
        assert all(lk.sends > 0 for lk in links)
        assert sum(lk.early for lk in links) > 0  # the leader overlapped its fsync
        nursery.cancel_scope.cancel()


async def test_interval_mode_writes_on_the_loop_and_fsyncs_when_asked(
    mock_clock: trio.testing.MockClock,
) -> None:
    from raft.config import RaftConfig

    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, IDS, config=RaftConfig(journal_fsync=False))
        await c.start()
        leader = await c.wait_leader()
        await leader.g.propose(b"x")
        await trio.testing.wait_all_tasks_blocked()
        syncs0 = {m.node_id: m.disk.syncs for m in c.live()}
        inline0 = {m.node_id: m.g._driver.inline_writes for m in c.live()}  # type: ignore[union-attr]
        for i in range(20):
            await leader.g.propose(b"y%d" % i)
        await trio.testing.wait_all_tasks_blocked()
        for m in c.live():
            drv = m.g._driver
            assert drv is not None
            assert m.disk.syncs == syncs0[m.node_id]  # appends: written, not fsynced
            assert drv.inline_writes > inline0[m.node_id]  # on the loop, no thread
            assert m.g.core.journal.unsynced
            assert m.disk.pending.get("g1.journal")
        for m in c.live():
            await m.g.sync_journal()
            assert m.disk.syncs == syncs0[m.node_id] + 1
            assert not m.g.core.journal.unsynced and not m.disk.pending.get("g1.journal")
            await m.g.sync_journal()  # nothing new: no fsync
            assert m.disk.syncs == syncs0[m.node_id] + 1
        # a member that stops fsyncs what it wrote
        await leader.g.propose(b"z")
        await trio.testing.wait_all_tasks_blocked()
        follower = next(m for m in c.live() if m is not leader)
        assert follower.disk.pending.get("g1.journal")
        await follower.crash()  # cancels its driver (then drops what is not synced)
        from raft.journal import DurableJournal

        replay = DurableJournal(follower.disk, "g1.journal")
        assert replay.entries()[-1][0].endswith(b"z")
        nursery.cancel_scope.cancel()


async def test_fast_lane_answers_in_the_readers_task_and_leaves_big_writes_to_the_driver(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Lone small entries are answered (followers) and committed (leader) by
    fast cycles in the task that delivered the frame; entries larger than
    ``inline_write_bytes_max`` are written by the driver; every replica ends
    with the same entries in the same order."""
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, IDS)
        await c.start()
        leader = await c.wait_leader()
        fast0 = {m.node_id: m.g._driver.fast_cycles for m in c.live()}  # type: ignore[union-attr]
        for i in range(20):
            await leader.g.propose(b"s%d" % i)
        big = b"x" * (c.config.inline_write_bytes_max * 2)
        for i in range(5):
            await leader.g.propose(big + b"%d" % i)
        await leader.g.propose(b"last")
        for m in c.live():
            assert m.g._driver.fast_cycles - fast0[m.node_id] >= 20, m.node_id  # type: ignore[union-attr]
        with trio.fail_after(10):
            while True:
                fsms = [m.g.core.fsm for m in c.live()]  # type: ignore[union-attr]
                if all(len(f.values) == len(leader.g.core.fsm.values) for f in fsms):
                    break
                await trio.sleep(0.05)
        assert len({f.chain for f in fsms}) == 1
        assert fsms[0].values[-1] == b"last"
        nursery.cancel_scope.cancel()


async def test_proposals_started_together_leave_at_once_in_the_callers_task(
    mock_clock: trio.testing.MockClock,
) -> None:
    """``start(kick=False)`` then ``proposed()`` on a parked leader: the new
    entry (one for all proposals started together) is appended and its
    append-entries sent before ``proposed()`` returns; its journal write is
    done there in interval mode (cheap), left to the driver's thread when it
    needs an fsync; every proposal commits."""
    for interval in (True, False):
        await _started_together(interval)


async def _started_together(interval: bool) -> None:
    from raft.config import RaftConfig

    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, IDS, config=RaftConfig(journal_fsync=not interval))
        await c.start()
        leader = await c.wait_leader()
        await leader.g.propose(b"warm")
        await trio.testing.wait_all_tasks_blocked()
        drv = leader.g._driver
        assert drv is not None and drv._parked
        links = c.net.links(leader.node_id)
        sent: list[str] = []
        inner = links.send

        def send(peer: str, gid: str, payload: bytes) -> bool:
            sent.append(peer)
            return inner(peer, gid, payload)

        links.send = send  # type: ignore[method-assign]
        journal = leader.g.core.journal
        last0, fast0 = journal.last_index, drv.fast_cycles
        done: list[object] = []
        all_done = trio.Event()

        def on_done(p: Proposal) -> None:
            done.append(p.result)
            if len(done) == 3:
                all_done.set()

        for i in range(3):
            leader.g.start(b"p%d" % i, on_done, kick=False)
        assert journal.last_index == last0 and not sent  # nothing yet
        leader.g.proposed()
        assert journal.last_index == last0 + 1  # one entry for the three
        assert sent  # its append-entries left in this task (a follower or two)
        if interval:
            assert drv.fast_cycles == fast0 + 1 and not journal.dirty  # written here
        else:
            assert drv._stash is not None  # the fsync is the driver's (its thread)
        with trio.fail_after(5):
            await all_done.wait()
        assert all(isinstance(r, int) for r in done) and len(set(done)) == 3
        links.send = inner  # type: ignore[method-assign]
        nursery.cancel_scope.cancel()
