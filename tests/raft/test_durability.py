"""Acknowledged proposals survive losing every member's un-fsynced data at once."""

from __future__ import annotations

import random

import trio
import trio.testing

from tests.raft.cluster_helpers import Cluster

IDS = ["a", "b", "c"]


async def test_acked_proposals_survive_coordinated_power_loss(
    mock_clock: trio.testing.MockClock,
) -> None:
    rng = random.Random(7)
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, IDS, seed=7)
        await c.start()
        acked: dict[bytes, object] = {}
        for round_ in range(3):
            leader = await c.wait_leader()

            async def one(i: int, leader=leader, round_=round_) -> None:
                v = b"r%d-%d" % (round_, i)
                acked[v] = await leader.g.propose(v)

            async with trio.open_nursery() as inner:
                for i in range(50):
                    inner.start_soon(one, i)
            # more proposals in flight (not acknowledged) while the power goes out
            for i in range(20):
                nursery.start_soon(_fire_and_forget, leader, b"unacked-%d-%d" % (round_, i))
            await trio.sleep(0.0005)
            for m in c.live():
                await m.crash(lose_unsynced=False)
            for m in c.members.values():
                m.disk.crash(rng)  # drop un-fsynced bytes, torn at a random offset
            for m in c.members.values():
                await m.start()
        leader = await c.wait_leader()
        await leader.g.propose(b"final")  # commits everything before it
        with trio.fail_after(10):
            await c.wait_applied(len(acked) + 1)
        for m in c.live():
            values = m.g.core.fsm.values
            for v, pos in acked.items():
                assert values[pos - 1] == v  # type: ignore[operator]
        nursery.cancel_scope.cancel()


async def _fire_and_forget(member, value: bytes) -> None:  # type: ignore[no-untyped-def]
    try:
        await member.g.propose(value)
    except Exception:
        pass
