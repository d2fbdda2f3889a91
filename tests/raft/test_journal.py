"""raft.journal / raft.storage: durable records, group commit, torn tails, compaction."""

from __future__ import annotations

import errno
import logging
import os
import random
from pathlib import Path

import pytest

from raft import storage
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


def _journal_file(tmp_path: Path) -> bytes:
    return (tmp_path / "g.journal").read_bytes()


def test_preallocated_journal_overwrites_zeros_and_replays_them_away(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    disk = OsDisk(tmp_path, preallocate=True)
    j = DurableJournal(disk, "g.journal")
    for i in range(1, 4):
        j.add(b"e%d" % i, i, 1)
        j.flush()
    written = disk.size("g.journal")
    data = _journal_file(tmp_path)
    # zeros written ahead of the records: the appends needed no new blocks
    assert len(data) >= storage.PREALLOCATE_BYTES_MIN > written
    assert data[written:] == bytes(len(data) - written) and disk.preallocations == 1
    disk.close()
    with caplog.at_level(logging.WARNING, logger="raft.journal"):
        disk2 = OsDisk(tmp_path, preallocate=True)
        j2 = DurableJournal(disk2, "g.journal")
    assert [e[0] for e in j2.entries()] == [b"e1", b"e2", b"e3"]
    assert "journal_tail_cut" not in caplog.text  # the zeros are no damage
    assert len(_journal_file(tmp_path)) == written  # cut: appends follow the records
    j2.add(b"e4", 4, 1)
    j2.flush()
    disk2.close()
    assert [e[0] for e in DurableJournal(OsDisk(tmp_path), "g.journal").entries()] == [
        b"e1",
        b"e2",
        b"e3",
        b"e4",
    ]


def test_preallocated_journal_grows_ahead_in_runs(tmp_path: Path) -> None:
    disk = OsDisk(tmp_path, preallocate=True)
    j = DurableJournal(disk, "g.journal")
    payload = b"p" * 1000
    for i in range(1, 301):  # ~300 KiB: past the first run of zeros, and the next
        j.add(payload, i, 1)
        j.flush()
    assert disk.preallocations >= 3
    assert len(_journal_file(tmp_path)) > disk.size("g.journal")
    disk.close()
    again = DurableJournal(OsDisk(tmp_path, preallocate=True), "g.journal")
    assert [e[1] for e in again.entries()] == list(range(1, 301))


def test_preallocated_journal_cuts_a_torn_record_among_zeros(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    disk = OsDisk(tmp_path, preallocate=True)
    j = DurableJournal(disk, "g.journal")
    j.add(b"good", 1, 1)
    j.flush()
    j.add(b"torn", 2, 1)
    rec = j.take_pending()
    size = disk.size("g.journal")
    disk.close()
    with open(tmp_path / "g.journal", "r+b") as f:  # a crash in mid-write: a prefix landed
        f.seek(size)
        f.write(rec[:9])
    with caplog.at_level(logging.WARNING, logger="raft.journal"):
        disk2 = OsDisk(tmp_path, preallocate=True)
        j2 = DurableJournal(disk2, "g.journal")
    assert list(j2.entries()) == [(b"good", 1, 1)]
    assert "journal_tail_cut" in caplog.text
    j2.add(b"next", 2, 2)  # written where the torn record was, zeros ahead again
    j2.flush()
    disk2.close()
    assert list(DurableJournal(OsDisk(tmp_path), "g.journal").entries()) == [
        (b"good", 1, 1),
        (b"next", 2, 2),
    ]


def test_preallocated_journal_failed_write_is_cut_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = OsDisk(tmp_path, preallocate=True)
    j = DurableJournal(disk, "g.journal")
    j.add(b"one", 1, 1)
    j.flush()
    j.add(b"two", 2, 1)
    data = j.take_pending()
    real = os.pwrite

    def torn(fd: int, buf: bytes, offset: int) -> int:  # a few bytes land, then ENOSPC
        real(fd, bytes(buf)[:5], offset)
        raise OSError(errno.ENOSPC, "no space left on device")

    monkeypatch.setattr(os, "pwrite", torn)
    with pytest.raises(OSError):
        j.write_pending(data)
    monkeypatch.setattr(os, "pwrite", real)
    j.write_pending(data)  # the driver retries with the same records
    j.written()
    j.add(b"three", 3, 1)
    j.flush()
    disk.close()
    assert [e[0] for e in DurableJournal(OsDisk(tmp_path), "g.journal").entries()] == [
        b"one",
        b"two",
        b"three",
    ]


def test_preallocated_journal_crash_mid_preallocation_keeps_the_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A crash while a run of zeros was being written ahead: the file holds the
    records and a part of the run; the replay keeps the records and cuts the
    zeros quietly."""
    disk = OsDisk(tmp_path, preallocate=True)
    j = DurableJournal(disk, "g.journal")
    j.add(b"one", 1, 1)
    j.flush()
    written = disk.size("g.journal")
    disk.close()
    with open(tmp_path / "g.journal", "r+b") as f:  # only 3 KiB of the run landed
        f.truncate(written + 3000)
    with caplog.at_level(logging.WARNING, logger="raft.journal"):
        disk2 = OsDisk(tmp_path, preallocate=True)
        j2 = DurableJournal(disk2, "g.journal")
    assert list(j2.entries()) == [(b"one", 1, 1)]
    assert "journal_tail_cut" not in caplog.text
    assert len(_journal_file(tmp_path)) == written
    j2.add(b"two", 2, 1)
    j2.flush()
    disk2.close()
    assert [e[0] for e in DurableJournal(OsDisk(tmp_path), "g.journal").entries()] == [
        b"one",
        b"two",
    ]


def test_preallocated_journal_failed_zero_run_is_cut_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write of a run of zeros fails midway (ENOSPC): the journal cuts the file
    back to its records, and the retried write lands right after them (not after
    the zeros that landed, where the replay would never reach it)."""
    disk = OsDisk(tmp_path, preallocate=True)
    j = DurableJournal(disk, "g.journal")
    j.add(b"one", 1, 1)
    j.flush()
    j.add(b"x" * (storage.PREALLOCATE_BYTES_MIN + 1), 2, 1)  # past the zeros: a new run
    data = j.take_pending()
    records_end = disk.size("g.journal")
    real = os.pwrite
    calls: list[int] = []

    def failing_run(fd: int, buf: bytes, offset: int) -> int:  # part of the zeros land
        calls.append(len(buf))
        if bytes(buf).count(0) == len(buf):
            real(fd, bytes(buf)[:4096], offset)
            raise OSError(errno.ENOSPC, "no space left on device")
        return real(fd, buf, offset)

    monkeypatch.setattr(os, "pwrite", failing_run)
    with pytest.raises(OSError):
        j.write_pending(data)
    monkeypatch.setattr(os, "pwrite", real)
    assert calls and len(_journal_file(tmp_path)) == records_end  # cut back, zeros too
    j.write_pending(data)
    j.written()
    j.add(b"three", 3, 1)
    j.flush()
    disk.close()
    assert [e[1] for e in DurableJournal(OsDisk(tmp_path), "g.journal").entries()] == [1, 2, 3]


_CHILD = """
import os, signal, sys
from raft.journal import DurableJournal
from raft.storage import OsDisk
root, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
j = DurableJournal(OsDisk(root, preallocate=True), "g.journal")
assert [e[1] for e in j.entries()] == list(range(1, first)), j.entries()
for i in range(first, first + count):
    j.add(b"c%d" % i, i, 1)
    j.flush()
j.add(b"unsynced", first + count, 1)  # taken, never written: lost with the process
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_preallocated_journal_restarts_after_kills_with_the_zero_tail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A process appending to a preallocated journal is killed (no close) twice;
    each restart replays every flushed record, cuts the zero tail quietly and
    appends after the records."""
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    first = 1
    for count in (40, 25):
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(tmp_path), str(first), str(count)],
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
        first += count
        data = _journal_file(tmp_path)
        assert data.endswith(bytes(1024))  # the kill left zeros written ahead
    with caplog.at_level(logging.WARNING, logger="raft.journal"):
        disk = OsDisk(tmp_path, preallocate=True)
        j = DurableJournal(disk, "g.journal")
    assert [(e[0], e[1]) for e in j.entries()] == [(b"c%d" % i, i) for i in range(1, first)]
    assert "journal_tail_cut" not in caplog.text
    assert len(_journal_file(tmp_path)) == disk.size("g.journal")
    disk.close()
