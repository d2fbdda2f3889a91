"""A full disk under the Raft journal (chaos F11 ``disk-full`` in miniature).

A write that fails with ENOSPC is cut back off the journal file (no torn record for a later
append to follow), nothing of that cycle is acknowledged, and the write is tried again until
space returns: the member then rejoins and catches up by itself; nothing acknowledged is lost.
"""

from __future__ import annotations

import errno

import trio
import trio.testing

from raft.journal import DurableJournal
from raft.storage import MemoryDisk
from tests.raft.cluster_helpers import Cluster

IDS = ["a", "b", "c"]


class FullDisk(MemoryDisk):
    """A memory disk whose appends write half their bytes, then fail with ENOSPC, while full."""

    def __init__(self) -> None:
        super().__init__()
        self.full = False
        self.refused = 0

    def append(self, name: str, data: bytes) -> None:
        if self.full:
            self.refused += 1
            super().append(name, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "no space left on device")
        super().append(name, data)


def test_a_failed_write_is_cut_back_and_written_again() -> None:
    disk = FullDisk()
    j = DurableJournal(disk, "g.journal")
    j.add(b"\x00one", 1, 1)
    j.flush()
    size = disk.size("g.journal")
    j.add(b"\x00two", 2, 1)
    disk.full = True
    data = j.take_pending()
    try:
        j.write_pending(data)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    else:
        raise AssertionError("ENOSPC expected")
    assert disk.size("g.journal") == size  # the torn half is gone
    j.untake_pending(data)
    j.add(b"\x00three", 3, 1)
    disk.full = False
    j.flush()
    again = DurableJournal(disk, "g.journal")
    assert [e[0] for e in again.entries()] == [b"\x00one", b"\x00two", b"\x00three"]


async def test_a_member_with_a_full_disk_resumes_and_catches_up(
    mock_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, IDS)
        for m in c.members.values():
            m.disk = FullDisk()
        await c.start()
        with trio.fail_after(30):
            leader = await c.wait_leader()
            for i in range(5):
                await leader.g.propose(b"%d" % i)
            victim = next(m for m in c.live() if m is not leader)
            disk = victim.disk
            assert isinstance(disk, FullDisk)
            disk.full = True
            for i in range(5, 40):  # the majority acknowledges without the victim
                await leader.g.propose(b"%d" % i)
            await trio.sleep(2)
            assert disk.refused >= 1
            held = victim.g.core.fsm.values
            assert held == [b"%d" % i for i in range(len(held))] and len(held) < 40
            disk.full = False
            await c.wait_applied(40)
        values = [b"%d" % i for i in range(40)]
        for m in c.live():
            assert m.g.core.fsm.values == values
        # what the victim wrote replays whole: no torn record in the middle
        assert (
            DurableJournal(victim.disk, "g1.journal").last_index == victim.g.core.journal.last_index
        )
        nursery.cancel_scope.cancel()


def test_a_failed_snapshot_cools_down_before_the_next_try() -> None:
    from chaos.toyfsm import ToyStateMachine
    from raft.snapshot import FAILED_RETRY_S, ChunkedSerializer, SnapshotStore

    now = [100.0]
    disk = FullDisk()
    store = SnapshotStore(disk, "g.snap", ToyStateMachine())
    store.clock = lambda: now[0]
    calls: list[int] = []

    def failing_write(name: str, snap: object) -> None:
        calls.append(1)
        raise OSError(errno.ENOSPC, "no space left on device")

    store.write = failing_write  # type: ignore[method-assign]
    ser = ChunkedSerializer(store, 1024)
    data = (None, (b"\x00a", 2, 1), (b"\x00b", 1, 1), [])
    ser.serialize(data, 1)
    assert ser.checkSerializing() == (3, 1)  # FAILED, once
    assert ser.checkSerializing()[0] == 1  # then "serializing" while cooling down
    now[0] += FAILED_RETRY_S + 0.01
    assert ser.checkSerializing() == (0, None)  # free to try again
    assert calls == [1]


async def test_a_leader_whose_disk_is_full_steps_down_at_once(
    mock_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        c = Cluster(nursery, IDS)
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
                await leader.g.propose(b"1")  # its own write fails: not acknowledged
            assert not leader.g.is_leader  # it stepped down and said so
            assert not (await heard.receive()).is_leader
            other = await c.wait_leader(exclude={leader.node_id})
            await other.g.propose(b"2")  # the others go on
            disk.full = False
            await c.wait_applied(2)
        nursery.cancel_scope.cancel()
