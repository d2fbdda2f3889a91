"""ENOSPC in the Raft journal's write: the partial write is cut back, nothing of the cycle
is acknowledged, the write is retried and the member resumes when space returns."""

from __future__ import annotations

import errno

import trio
import trio.testing

from raft.journal import DurableJournal
from raft.storage import MemoryDisk
from tests.raft.cluster_helpers import Cluster


class FullDisk(MemoryDisk):
    """A MemoryDisk whose appends (and, with ``cut_fails``, truncations) fail with ENOSPC
    while ``full``, after writing ``partial`` bytes of the append (a torn write)."""

    def __init__(self) -> None:
        super().__init__()
        self.full = False
        self.cut_fails = False
        self.partial = 7
        self.failures = 0

    def append(self, name: str, data: bytes) -> None:
        if self.full:
            self.failures += 1
            super().append(name, data[: self.partial])
            raise OSError(errno.ENOSPC, "no space left on device")
        super().append(name, data)

    def truncate(self, name: str, size: int) -> None:
        if self.full and self.cut_fails:
            raise OSError(errno.ENOSPC, "no space left on device")
        super().truncate(name, size)

    def write_atomic(self, name: str, data: bytes) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "no space left on device")
        super().write_atomic(name, data)


def _entries(j: DurableJournal) -> list[tuple[bytes, int, int]]:
    return list(j.entries())


def test_a_failed_append_is_cut_back_and_written_again() -> None:
    for cut_fails in (False, True):
        disk = FullDisk()
        j = DurableJournal(disk, "g.journal")
        j.add(b"one", 1, 1)
        j.flush()
        j.add(b"two", 2, 1)
        data = j.take_pending()
        disk.full, disk.cut_fails = True, cut_fails
        for _ in range(3):  # the driver retries with the same records
            try:
                j.write_pending(data)
            except OSError:
                pass
            else:
                raise AssertionError("the write should fail while the disk is full")
        disk.full = False
        j.add(b"three", 3, 1)
        j.write_pending(data)  # space is back: the retried records go first
        j.flush()
        again = DurableJournal(disk, "g.journal")  # replay: nothing torn, nothing lost
        assert _entries(again) == [(b"one", 1, 1), (b"two", 2, 1), (b"three", 3, 1)], cut_fails
        assert j.write_failures == (1 if cut_fails else 3)  # a failed cut stops before appending


async def test_member_with_a_full_disk_acknowledges_nothing_and_resumes(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0.01
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, ["a", "b", "c"], seed=5)
        for m in c.members.values():
            m.disk = FullDisk()
        await c.start()
        with trio.fail_after(60):
            leader = await c.wait_leader()
            for i in range(5):
                await leader.g.propose(b"v%d" % i)
            victim = next(m for m in c.live() if m is not leader)
            disk = victim.disk
            assert isinstance(disk, FullDisk)
            disk.full = True
            for i in range(5, 40):  # a majority still commits without the victim
                await leader.g.propose(b"v%d" % i)
            assert disk.failures > 0
            # nothing past what it wrote before the disk filled was acknowledged by it
            match = leader.g.status()["peers"][victim.node_id]["match_index"]
            assert match is not None and match <= victim.g.core.journal.last_index
            assert len(victim.g.core.fsm.values) <= 5 + 1  # type: ignore[attr-defined]
            disk.full = False  # space returns: the member catches up by itself
            await c.wait_applied(40)
        values = [m.g.core.fsm.values for m in c.live()]  # type: ignore[attr-defined]
        assert values[0] == values[1] == values[2]
        assert values[0] == [b"v%d" % i for i in range(40)]
        nursery.cancel_scope.cancel()


async def test_a_leader_whose_disk_is_full_steps_down_at_once(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Its node then stops answering as the leader (capture, reads) while the others elect."""
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, ["a", "b", "c"])
        for m in c.members.values():
            m.disk = FullDisk()
        await c.start()
        with trio.fail_after(30):
            leader = await c.wait_leader()
            await leader.g.propose(b"0")
            disk = leader.disk
            assert isinstance(disk, FullDisk)
            heard = leader.g.subscribe_leadership()
            assert (await heard.receive()).is_leader
            disk.full = True
            with trio.move_on_after(1.0):
                await leader.g.propose(b"1")  # its own write fails: not acknowledged here
            assert not leader.g.is_leader  # it stepped down and said so
            assert not (await heard.receive()).is_leader
            other = await c.wait_leader(exclude={leader.node_id})
            await other.g.propose(b"2")  # the others go on
            disk.full = False
            await c.wait_applied(2)
        nursery.cancel_scope.cancel()
