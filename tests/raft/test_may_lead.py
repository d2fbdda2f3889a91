"""A member whose state machine says ``can_lead() -> False`` (a replica with a hole) never
campaigns: not on its election timeout, not when asked to take over (``timeout_now``)."""

from __future__ import annotations

import trio
import trio.testing

from chaos.toyfsm import ToyStateMachine
from raft.errors import TransferFailed
from tests.raft.cluster_helpers import Cluster

IDS = ["a", "b", "c"]


class HoledFSM(ToyStateMachine):
    may_lead = True

    def can_lead(self) -> bool:
        return self.may_lead


async def test_a_member_that_may_not_lead_never_leads(mock_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, IDS, fsm_factory=HoledFSM)
        await c.start()
        with trio.fail_after(60):
            leader = await c.wait_leader()
            await leader.g.propose(b"x")
            holed = next(m for m in c.live() if m is not leader)
            fsm = holed.g.core.fsm
            assert isinstance(fsm, HoledFSM)
            fsm.may_lead = False
            try:  # asked to take over: it does not
                await leader.g.step_down(timeout_s=2.0, target=holed.node_id)
            except TransferFailed:
                pass
            assert not holed.g.is_leader
            for _ in range(3):  # the leader goes away, again and again: someone else leads
                current = await c.wait_leader()
                assert current is not holed
                await current.crash()
                nxt = await c.wait_leader()
                assert nxt is not holed and nxt is not current
                await current.start()
                await trio.sleep(1.0)
            assert not holed.g.is_leader
            fsm.may_lead = True  # current again: it may lead
            other = await c.wait_leader()
            await other.crash()
            third = next(m for m in c.live() if m is not holed)
            await third.crash()
            await other.start()
            new = await c.wait_leader()
            assert new in (holed, other)
        nursery.cancel_scope.cancel()
