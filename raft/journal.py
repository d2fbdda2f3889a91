"""Durable Raft journal for pysyncobj: entries, term and vote, group-committed.

Theory of operation
-------------------
pysyncobj's own ``FileJournal`` writes entries through an mmap that is never
fsynced (``flush`` only at destroy) and stores term/vote in a side file that
is renamed without fsync, so an acknowledged entry or a granted vote can
vanish at power loss. :class:`DurableJournal` replaces it.

* In memory it is a list of ``(command: bytes, idx: int, term: int)`` tuples,
  exactly what pysyncobj indexes and slices.
* Every mutation appends a *record* to an in-memory buffer; :meth:`flush`
  (called by the driver once per cycle, before any message of that cycle
  leaves the node) appends the buffer to the file and fsyncs it. That is the
  group commit: all entries, the term and the vote a cycle produced become
  durable with one fsync, before the responses/votes that depend on them are
  sent.
* Records: ``u32 body_len | u32 crc32(body) | body`` where body starts with a
  kind byte: ENTRY(idx, term, command), TRUNCATE(from idx), STATE(term,
  voted_for), COMMIT(idx), CLEAR. Replay applies them in order; a record whose
  length or checksum is bad ends the replay and the file is cut there (a torn
  tail from a crash during a write). The cut is logged with the byte count,
  unless everything after the last good record is zeros: the unused end of a
  file a preallocating disk (``raft.storage.OsDisk``) keeps ahead of its
  data, cut as well, so appends follow the last record.
* Compaction (``deleteEntriesTo``, after a durable snapshot) rewrites the
  whole file atomically (temp file, fsync, rename, directory fsync); pending
  records are folded into the rewrite.  With ``defer_rewrite`` (the trio
  driver) the rewrite is not done at once: the journal becomes dirty and the
  next :meth:`take_pending` hands out the whole new file, which
  :meth:`write_pending` then writes atomically (in the driver's sync thread,
  off the event loop).  Until then the file holds the old, longer log: a
  crash in between keeps a superset, which is harmless.
* A failed append (ENOSPC, EIO) is cut back: the file is truncated to its
  length before the append (a torn record in the middle would end the replay
  there and lose what follows), and the same records are written again by the
  next :meth:`write_pending` (the driver retries with the data it took); if the
  cut itself fails it is retried first.
* ``entry_bytes`` counts the commands held (the bound a stream group's
  compaction watches: the journal must not become a second copy of a stream).

``durable_index`` is the last index of the log up to which every entry is
on disk (fsynced): :meth:`take_pending` notes the log's end, and the write's
success (:meth:`written`, or :meth:`flush`) makes it durable; a truncation
lowers both at once (the entries after it are new ones).  A leader counts
itself towards a majority only up to it (``RaftCore.cycle``): its own fsync
may still be in flight while the followers' acknowledgements commit.

Interval mode (``fsync_appends = False``: the user's ``sync_interval``, as
nats-server's stores and Raft logs do by default): appends of entries,
truncations and commit marks are written to the file but not fsynced; a
cycle's write is then cheap enough to make on the event loop (``cheap``), and
:meth:`sync_appended` (the driver, on the stream's interval, and when the
member stops) makes them durable.  Term and vote records, and compaction
rewrites, are still fsynced before anything that depends on them leaves the
node.  ``durable_index`` then means "written": what survives a process crash
(the page cache keeps it), not a power loss -- the promise nats-server makes
at its default.

``changed_from`` records the lowest Raft index touched since the last
:meth:`take_changed_from` (used by the simulator's incremental safety checks).
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Sequence
from typing import Any

from pysyncobj.journal import Journal

from raft import trace
from raft.storage import Disk

__all__ = ["DurableJournal", "JournalEntry"]

log = logging.getLogger(__name__)

JournalEntry = tuple[bytes, int, int]

_REC = struct.Struct(">II")
_K_ENTRY = 1
_K_TRUNCATE = 2
_K_STATE = 3
_K_COMMIT = 4
_K_CLEAR = 5
_QQ = struct.Struct(">QQ")
_Q = struct.Struct(">Q")


def _record(body: bytes) -> bytes:
    return _REC.pack(len(body), zlib.crc32(body)) + body


def _entry_rec(cmd: bytes, idx: int, term: int) -> bytes:
    return _record(bytes((_K_ENTRY,)) + _QQ.pack(idx, term) + cmd)


def _state_rec(term: int, voted_for: str | None) -> bytes:
    vf = b"\x00" if voted_for is None else b"\x01" + voted_for.encode("utf-8")
    return _record(bytes((_K_STATE,)) + _Q.pack(term) + vf)


class DurableJournal(Journal):  # type: ignore[misc]
    """pysyncobj ``Journal`` on a :class:`~raft.storage.Disk` file, fsynced per cycle."""

    def __init__(self, disk: Disk, name: str) -> None:
        self._disk = disk
        self._name = name
        self._entries: list[JournalEntry] = []
        self._term = 0
        self._voted_for: str | None = None
        self._commit = 1
        self._buf = bytearray()
        self._must_sync = False
        self.changed_from: int | None = None
        self.fsyncs = 0
        #: compaction rewrites are handed to the next take_pending/write_pending
        self.defer_rewrite = False
        self._rewrite_due = False
        self._pending_is_rewrite = False
        #: a failed append left bytes past this length: cut them before writing
        self._cut_to: int | None = None
        self.write_failures = 0
        #: bytes of the commands held in memory (and in the file)
        self.entry_bytes = 0
        self._replay()
        self.entry_bytes = sum(len(e[0]) for e in self._entries)
        #: every entry up to this index is on disk (what the replay read is)
        self.durable_index = self.last_index
        #: the log's end when the records being written were taken
        self._taken_to = self.durable_index
        #: False: interval mode (see the module doc)
        self.fsync_appends = True
        #: a term/vote record waits in the buffer (fsynced even in interval mode)
        self._state_pending = False
        #: the records taken last must be fsynced by ``write_pending``
        self._pending_sync = True
        #: interval mode: appends written since the last fsync
        self.unsynced = False

    # ------------------------------------------------------------ replay

    def _replay(self) -> None:
        data = self._disk.read(self._name)
        if not data:
            return
        pos, n = 0, len(data)
        entries = self._entries
        while pos < n:
            if n - pos < _REC.size:
                break
            blen, crc = _REC.unpack_from(data, pos)
            end = pos + _REC.size + blen
            if blen == 0 or end > n:
                break
            body = data[pos + _REC.size : end]
            if zlib.crc32(body) != crc:
                break
            kind = body[0]
            if kind == _K_ENTRY:
                idx, term = _QQ.unpack_from(body, 1)
                entries.append((bytes(body[17:]), idx, term))
            elif kind == _K_TRUNCATE:
                (idx,) = _Q.unpack_from(body, 1)
                while entries and entries[-1][1] >= idx:
                    entries.pop()
            elif kind == _K_STATE:
                (self._term,) = _Q.unpack_from(body, 1)
                self._voted_for = None if body[9] == 0 else bytes(body[10:]).decode("utf-8")
            elif kind == _K_COMMIT:
                (self._commit,) = _Q.unpack_from(body, 1)
            elif kind == _K_CLEAR:
                entries.clear()
            else:
                break
            pos = end
        if pos < n:
            if data.count(0, pos) != n - pos:  # zeros only: a preallocated file's unused end
                log.warning(
                    "event=journal_tail_cut file=%s kept_bytes=%d dropped_bytes=%d",
                    self._name,
                    pos,
                    n - pos,
                )
            self._disk.truncate(self._name, pos)
        if entries and self._commit > entries[-1][1]:
            self._commit = entries[-1][1]

    # ------------------------------------------------------------ durability

    @property
    def name(self) -> str:
        return self._name

    @property
    def dirty(self) -> bool:
        """True if entries, term or vote are waiting for :meth:`flush`.

        A commit-index record alone does not make the journal dirty: Raft does
        not need it durable (it is recomputed), so it rides with the next fsync.
        """
        return self._must_sync

    def take_pending(self) -> bytes:
        """Hand the pending records to the caller, who must append+sync them in order
        (with :meth:`write_pending`, before the next ``take_pending``).  After a
        deferred compaction these are the whole new file, which
        ``write_pending`` writes atomically instead of appending."""
        if self._rewrite_due:
            self._rewrite_due = False
            self._pending_is_rewrite = True
            data = self._whole_file()
        else:
            data = bytes(self._buf)
        self._pending_sync = self.fsync_appends or self._state_pending or self._pending_is_rewrite
        self._state_pending = False
        self._buf.clear()
        self._must_sync = False
        self._taken_to = self.last_index
        return data

    #: interval mode: a write of at most this much is made on the event loop
    INLINE_WRITE_BYTES_MAX = 256 * 1024

    def cheap(self, data: bytes) -> bool:
        """May the records just taken be written on the event loop?  Only in
        interval mode, when they need no fsync and are small."""
        return not self._pending_sync and len(data) <= self.INLINE_WRITE_BYTES_MAX

    def sync_appended(self) -> None:
        """Interval mode: fsync the appends written since the last fsync (may
        run in a thread).

        Raises:
            OSError: the fsync failed; ``unsynced`` stays set (the next call retries).
        """
        if not self.unsynced:
            return
        self.unsynced = False
        try:
            self._disk.sync(self._name)
        except OSError:
            self.unsynced = True
            raise
        self.fsyncs += 1

    @property
    def rewriting(self) -> bool:
        """The records last taken are a whole new file (a compaction's rewrite)."""
        return self._pending_is_rewrite

    def written(self) -> None:
        """The records handed out by the last :meth:`take_pending` are on disk
        (call once :meth:`write_pending` returned, in the owner's thread)."""
        self.durable_index = self._taken_to

    def _lower_durable(self, idx: int) -> None:
        """Entries from ``idx`` on were removed: what comes there is not durable."""
        self.durable_index = min(self.durable_index, idx - 1)
        self._taken_to = min(self._taken_to, idx - 1)

    def write_pending(self, data: bytes) -> None:
        """Append and fsync records taken by :meth:`take_pending`, or replace the
        file with them after a compaction (may run in a thread).

        Raises:
            OSError: the write failed (ENOSPC …); the caller decides what of
                the cycle may still leave the node (nothing).
        """
        if self._pending_is_rewrite:
            self._disk.write_atomic(self._name, data)
            self._pending_is_rewrite = False  # only now: a failed rewrite is retried
            self.fsyncs += 1
            return
        if self._cut_to is not None:
            self._disk.truncate(self._name, self._cut_to)
            self._cut_to = None
        if data:
            before = self._disk.size(self._name)
            try:
                if trace.ON:
                    trace.stamp("w0", self._name[:12], 0, 0)
                self._disk.append(self._name, data)
                if self._pending_sync:
                    self._disk.sync(self._name)
                else:
                    self.unsynced = True
                if trace.ON:
                    trace.stamp("w1", self._name[:12], 0, 0)
            except OSError:
                self.write_failures += 1
                self._cut_to = before
                try:
                    self._disk.truncate(self._name, before)
                    self._cut_to = None
                except OSError:
                    pass  # cut before the next write
                raise
            if self._pending_sync:
                self.fsyncs += 1

    def flush(self) -> None:
        """Make every mutation so far durable (one append + one fsync; no-op if clean)."""
        if self._must_sync:
            self.write_pending(self.take_pending())
            self.written()

    def _mark(self, idx: int) -> None:
        if self.changed_from is None or idx < self.changed_from:
            self.changed_from = idx

    def take_changed_from(self) -> int | None:
        c, self.changed_from = self.changed_from, None
        return c

    # ------------------------------------------------------------ pysyncobj Journal API

    def add(self, command: bytes, idx: int, term: int) -> None:
        if type(command) is not bytes:
            command = bytes(command)
        self._entries.append((command, idx, term))
        self.entry_bytes += len(command)
        self._buf += _entry_rec(command, idx, term)
        self._must_sync = True
        self._mark(idx)

    def clear(self) -> None:
        if self._entries:
            self._mark(self._entries[0][1])
            self._lower_durable(self._entries[0][1])
        self._entries = []
        self.entry_bytes = 0
        self._buf += _record(bytes((_K_CLEAR,)))
        self._must_sync = True

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        if entryFrom >= len(self._entries):
            return
        idx = self._entries[entryFrom][1]
        self._lower_durable(idx)
        self.entry_bytes -= sum(len(e[0]) for e in self._entries[entryFrom:])
        del self._entries[entryFrom:]
        self._buf += _record(bytes((_K_TRUNCATE,)) + _Q.pack(idx))
        self._must_sync = True
        self._mark(idx)

    def deleteEntriesTo(self, entryTo: int) -> None:
        if entryTo <= 0:
            return
        self.entry_bytes -= sum(len(e[0]) for e in self._entries[:entryTo])
        self._entries = self._entries[entryTo:]
        if self.defer_rewrite:
            self._rewrite_due = True
            self._must_sync = True
            self._buf.clear()
            return
        self.rewrite()

    def _whole_file(self) -> bytes:
        parts = [_state_rec(self._term, self._voted_for)]
        parts.append(_record(bytes((_K_COMMIT,)) + _Q.pack(self._commit)))
        parts.extend(_entry_rec(c, i, t) for c, i, t in self._entries)
        return b"".join(parts)

    def rewrite(self) -> None:
        """Rewrite the whole file atomically from memory (compaction)."""
        self._buf.clear()
        self._must_sync = False
        self._rewrite_due = False
        self._disk.write_atomic(self._name, self._whole_file())
        self.fsyncs += 1
        self.durable_index = self._taken_to = self.last_index

    def __getitem__(self, item: Any) -> Any:
        return self._entries[item]

    def __len__(self) -> int:
        return len(self._entries)

    def _destroy(self) -> None:
        pass

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        if raftCommitIndex != self._commit:
            self._commit = raftCommitIndex
            self._buf += _record(bytes((_K_COMMIT,)) + _Q.pack(raftCommitIndex))

    def getRaftCommitIndex(self) -> int:
        return self._commit

    def setCurrentTerm(self, term: int, votedForNodeId: str | None) -> None:
        if term == self._term and votedForNodeId == self._voted_for:
            return
        self._term = term
        self._voted_for = votedForNodeId
        self._buf += _state_rec(term, votedForNodeId)
        self._must_sync = True
        self._state_pending = True

    def getCurrentTerm(self) -> int:
        return self._term

    def getVotedForNodeId(self) -> str | None:
        return self._voted_for

    def onOneSecondTimer(self) -> None:
        pass

    # ------------------------------------------------------------ helpers for raft.core

    @property
    def first_index(self) -> int:
        return self._entries[0][1] if self._entries else 0

    @property
    def last_index(self) -> int:
        return self._entries[-1][1] if self._entries else 0

    def term_at(self, idx: int) -> int | None:
        """Term of the entry at Raft index ``idx``, or None if not in the log."""
        if not self._entries:
            return None
        pos = idx - self._entries[0][1]
        if 0 <= pos < len(self._entries):
            return self._entries[pos][2]
        return None

    def entry_at(self, idx: int) -> JournalEntry | None:
        if not self._entries:
            return None
        pos = idx - self._entries[0][1]
        if 0 <= pos < len(self._entries):
            return self._entries[pos]
        return None

    def entries(self) -> Sequence[JournalEntry]:
        return self._entries
