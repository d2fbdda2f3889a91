"""A member whose state machine says ``can_lead() -> False`` (a replica with a hole) never
campaigns: not on its election timeout, not when asked to take over (``timeout_now``)."""

from __future__ import annotations

import trio
import trio.testing

from chaos.toyfsm import ToyStateMachine
from raft.errors import TransferFailed
from raft.proposal import LeaderState
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


class HeldFSM(ToyStateMachine):
    hold = False

    def can_apply(self) -> bool:
        return not self.hold


async def test_a_new_leader_serves_only_once_its_state_holds_every_committed_entry(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A member elected with committed entries not yet applied is leading (it takes
    proposals) but not serving: ``is_leader`` and the leadership channel say so only
    after this term's first entry is applied, so nothing reads a state that lacks an
    acknowledged entry (a consumer on it saw num_pending 0 short of the stream's end)."""
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, IDS, fsm_factory=HeldFSM)
        await c.start()
        with trio.fail_after(60):
            leader = await c.wait_leader()
            await leader.g.propose(b"x")
            await c.wait_applied(1)
            nxt = next(m for m in c.live() if m is not leader)
            fsm = nxt.g.core.fsm
            assert isinstance(fsm, HeldFSM)
            fsm.hold = True
            await leader.g.propose(b"y")  # committed by the leader and the third member
            seen: list[LeaderState] = []
            channel = nxt.g.subscribe_leadership()
            await leader.g.step_down(timeout_s=5.0, target=nxt.node_id)
            for _ in range(500):  # the transfer lands (bounded)
                if nxt.g.core.is_leader:
                    break
                await trio.sleep(0.01)
            await trio.sleep(2.0)  # leading for a while, applies held
            while True:
                try:
                    seen.append(channel.receive_nowait())
                except trio.WouldBlock:
                    break
            assert nxt.g.core.is_leader and not nxt.g.is_leader
            assert not any(s.is_leader for s in seen), seen
            assert fsm.values == [b"x"]
            fsm.hold = False
            await nxt.g.propose(b"z")  # the next cycle applies y, the no-op and z
            with trio.fail_after(5):
                while True:
                    s = await channel.receive()
                    if s.is_leader:
                        break
            assert nxt.g.is_leader
            assert fsm.values[:3] == [b"x", b"y", b"z"]
        nursery.cancel_scope.cancel()
