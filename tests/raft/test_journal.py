"""raft.journal / raft.storage: durable records, group commit, torn tails, compaction."""

from __future__ import annotations

import random
from pathlib import Path

from raft.journal import DurableJournal
from raft.storage import MemoryDisk, OsDisk


def test_unsynced_records_are_lost_at_crash_synced_ones_survive() -> None:
    disk = MemoryDisk()
    j = DurableJournal(disk, "g.journal")
    j.add(b"a", 1, 1)
    j.setCurrentTerm(1, "n1")
    j.flush()
    j.add(b"b", 2, 1)
    j.setCurrentTerm(2, None)
    assert disk.syncs == 1
    disk.crash()
    j2 = DurableJournal(disk, "g.journal")
    assert list(j2.entries()) == [(b"a", 1, 1)]
    assert (j2.getCurrentTerm(), j2.getVotedForNodeId()) == (1, "n1")


def test_one_fsync_per_flush_whatever_the_number_of_records() -> None:
    disk = MemoryDisk()
    j = DurableJournal(disk, "g.journal")
    for i in range(1, 500):
        j.add(b"x" * 10, i, 1)
    j.setRaftCommitIndex(400)
    j.flush()
    j.flush()  # clean: no-op
    assert disk.syncs == 1


def test_torn_tail_is_cut_and_replay_applies_truncate_and_clear() -> None:
    disk = MemoryDisk()
    j = DurableJournal(disk, "g.journal")
    for i in range(1, 6):
        j.add(b"e%d" % i, i, 1)
    j.deleteEntriesFrom(3)  # drops idx 4, 5
    j.add(b"new4", 4, 2)
    j.setRaftCommitIndex(4)
    j.flush()
    j.add(b"lost", 5, 2)
    disk.pending.setdefault("g.journal", bytearray())
    # a torn, unsynced tail: keep a random prefix of the last record
    disk.append("g.journal", j.take_pending()[:7])
    disk.crash(random.Random(1))
    j2 = DurableJournal(disk, "g.journal")
    assert [e[0] for e in j2.entries()] == [b"e1", b"e2", b"e3", b"new4"]
    assert j2.getRaftCommitIndex() == 4
    # the cut is durable: new records follow good ones
    j2.add(b"five", 5, 2)
    j2.flush()
    assert [e[0] for e in DurableJournal(disk, "g.journal").entries()][-1] == b"five"
    j2.clear()
    j2.add(b"snapbase", 100, 3)
    j2.flush()
    assert list(DurableJournal(disk, "g.journal").entries()) == [(b"snapbase", 100, 3)]


def test_corrupted_record_ends_replay() -> None:
    disk = MemoryDisk()
    j = DurableJournal(disk, "g.journal")
    for i in range(1, 4):
        j.add(b"e%d" % i, i, 1)
    j.flush()
    data = bytearray(disk.durable["g.journal"])
    data[-2] ^= 0xFF
    disk.durable["g.journal"] = data
    assert [e[1] for e in DurableJournal(disk, "g.journal").entries()] == [1, 2]


def test_compaction_rewrites_atomically(tmp_path: Path) -> None:
    disk = OsDisk(tmp_path)
    j = DurableJournal(disk, "g.journal")
    for i in range(1, 101):
        j.add(b"x%d" % i, i, 1)
    j.setCurrentTerm(3, "b")
    j.flush()
    j.deleteEntriesTo(90)
    j.add(b"after", 101, 3)  # pending, folded in by the next flush
    j.flush()
    disk.close()
    j2 = DurableJournal(OsDisk(tmp_path), "g.journal")
    assert [e[1] for e in j2.entries()] == list(range(91, 102))
    assert (j2.getCurrentTerm(), j2.getVotedForNodeId()) == (3, "b")
    assert j2.term_at(95) == 1 and j2.term_at(90) is None


def test_interval_mode_writes_appends_without_fsync_until_asked() -> None:
    disk = MemoryDisk()
    j = DurableJournal(disk, "g.journal")
    j.fsync_appends = False
    j.add(b"a", 1, 1)
    data = j.take_pending()
    assert j.cheap(data)  # no fsync needed, small: the driver writes it on the loop
    j.write_pending(data)
    j.written()
    assert disk.syncs == 0 and j.unsynced and j.durable_index == 1
    # a process crash keeps the page cache: what was written is read back
    assert list(DurableJournal(disk, "g.journal").entries()) == [(b"a", 1, 1)]
    j.sync_appended()
    assert disk.syncs == 1 and not j.unsynced
    j.sync_appended()  # nothing new: no fsync
    assert disk.syncs == 1
    disk.crash()
    assert list(DurableJournal(disk, "g.journal").entries()) == [(b"a", 1, 1)]


def test_interval_mode_still_fsyncs_term_and_vote() -> None:
    disk = MemoryDisk()
    j = DurableJournal(disk, "g.journal")
    j.fsync_appends = False
    j.add(b"a", 1, 1)
    j.setCurrentTerm(2, "n2")
    data = j.take_pending()
    assert not j.cheap(data)  # a vote must be on disk before it is granted
    j.write_pending(data)
    j.written()
    assert disk.syncs == 1
    disk.crash()
    j2 = DurableJournal(disk, "g.journal")
    assert (j2.getCurrentTerm(), j2.getVotedForNodeId()) == (2, "n2")
    # the next plain append is cheap again
    j.add(b"b", 2, 2)
    assert j.cheap(j.take_pending())


def test_interval_mode_large_writes_are_not_cheap() -> None:
    j = DurableJournal(MemoryDisk(), "g.journal")
    j.fsync_appends = False
    j.add(b"x" * (DurableJournal.INLINE_WRITE_BYTES_MAX + 1), 1, 1)
    assert not j.cheap(j.take_pending())
