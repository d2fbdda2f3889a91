"""A follower whose leader's link closes (the leader's process died) stands for
election at once instead of waiting out its election timeout (issue 13: stream groups
got longer election timeouts to ride out event-loop pauses under load, and crash
failover must not pay for them)."""

from __future__ import annotations

import random

import trio

from chaos.toyfsm import ToyStateMachine
from raft.config import RaftConfig
from raft.group import RaftGroup
from raft.links import TcpPeerLinks
from raft.storage import MemoryDisk

IDS = ["a", "b", "c"]
#: far longer than the test waits for anything: only the link-down path elects in time
SLOW = RaftConfig(election_timeout_s_min=30.0, election_timeout_s_max=40.0)


async def test_followers_elect_when_the_leaders_link_closes() -> None:
    links = {n: TcpPeerLinks(n, b"secret", {}) for n in IDS}
    groups = {
        n: RaftGroup(
            "g",
            n,
            [p for p in IDS if p != n],
            ToyStateMachine(),
            links[n],
            MemoryDisk(),
            SLOW,
            rng=random.Random(n),
            fsync_in_thread=False,
        )
        for n in IDS
    }
    scopes = {n: trio.CancelScope() for n in IDS}

    async def node(n: str, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with scopes[n]:
            async with trio.open_nursery() as nursery:
                listeners = await nursery.start(links[n].serve, "127.0.0.1", 0)
                ports[n] = listeners[0].socket.getsockname()[1]
                task_status.started()
                await ready.wait()
                await nursery.start(links[n].run)
                await nursery.start(groups[n].run)

    ports: dict[str, int] = {}
    ready = trio.Event()
    async with trio.open_nursery() as nursery:
        for n in IDS:
            await nursery.start(node, n)
        for n in IDS:
            for p in IDS:
                if p != n:
                    links[n].add_peer(p, ("127.0.0.1", ports[p]))
        ready.set()
        with trio.fail_after(60):
            for n in IDS:
                for p in IDS:
                    if p != n:
                        await links[n].wait_connected(p)
            # the first election waits out the (long) timeout unless forced: transfer
            # is not available without a leader, so make one member stand now
            groups["a"].core.obj._SyncObj__raftElectionDeadline = 0.0
            groups["a"].kick()
            old = await groups["b"].wait_leader()
            await groups[old].propose(b"x")
            scopes[old].cancel()  # the leader's process is gone: its links close
            survivors = [n for n in IDS if n != old]
            new = None
            for _ in range(600):
                lead = [n for n in survivors if groups[n].is_leader]
                if lead:
                    new = lead[0]
                    break
                await trio.sleep(0.05)
        assert new is not None
        assert sum(groups[n].core.leader_links_lost for n in survivors) >= 1
        with trio.fail_after(30):
            await groups[new].propose(b"y")  # the group serves again
        nursery.cancel_scope.cancel()
