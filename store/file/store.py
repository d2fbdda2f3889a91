"""``FileStreamStore``: a stream kept in append-only segment files.

Theory of operation
-------------------
*Log.*  Every mutation appends records to the active (last) segment: a MSG
record per message, one TOMB record per operation listing the sequences it
deleted, a FLOOR record when everything below a sequence goes (compact).
Records carry a CRC32; segments carry magic, version, base sequence, the
stream's ``last_ts`` at creation and a floor.  Nothing already written is
modified in place except by ``remove(erase=True)`` (which overwrites the
message's bytes and re-checksums the record) and by ``truncate`` (which cuts
the log).  When the active segment reaches ``segment_bytes_max`` it is
sealed: fsynced, optionally rewritten as lz4 chunks (``compression=True``,
what StreamConfig ``compression: "s2"`` maps to), checkpointed, and a new
active segment is created (file and directory fsynced).

*Index.*  Per segment, parallel compact arrays (``store.file.segment``); per
subject, ``array('q')`` count/first/last indexed by a subject id, with first
and last recomputed lazily after deletions (C-speed ``array.index``).  The
state visible to callers is derived exactly as in ``store.api``.

*Segment removal.*  A sealed segment with no live message is deleted.  Its
TOMB records may still be needed by older segments, so before unlinking it
the store re-appends (and fsyncs) a FLOOR record with the current first
sequence and a TOMB record with the still-relevant deletions.  Purge-all and
compact past the end create a fresh segment whose header floor covers
everything, then unlink the rest.

*Durability.*  Appends go to a write buffer; ``sync()`` writes it and fsyncs
(group commit: one fsync for every append since the last sync).  Segment
creation, sealing, removal and restore fsync files and the directory
themselves.  An append is durable only once ``sync()`` has returned.

*Recovery.*  ``store.file.recovery`` rebuilds each segment's index from its
checkpoint (verified by size and CRC) plus a scan of unchecked bytes; then
the floor and all tombstones are applied and per-subject state is merged from
per-segment summaries.  Damage is reported in ``recovery_report`` and never
served.  Damaged segments are never checkpointed, so damage is reported at
every open until the data is gone (purged/compacted away).

*Restore.*  A snapshot is staged into ``restore.tmp/`` as a complete store,
then a marker listing the staged files is written and the files are moved in;
a crash during the move is finished at the next open.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import zlib
from array import array
from collections.abc import Iterator
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from store.api import (
    DamagedRange,
    Filters,
    RecoveryReport,
    StoredMsg,
    StreamState,
    StreamStore,
    SubjectState,
    SyncPolicy,
)
from store.errors import (
    InvariantViolation,
    MsgNotFound,
    SequenceMismatch,
    StoreClosed,
    StoreEOF,
)
from store.file.format import (
    KIND_ERASED,
    KIND_FLOOR,
    KIND_MSG,
    KIND_SEAL,
    KIND_TOMB,
    REC_HDR,
    SEG_HDR_SIZE,
    encode_record,
)
from store.file.recovery import add_gap, open_segment
from store.file.segment import Segment, fsync_dir
from store.limits import (
    Accounting,
    StreamLimits,
    check_append,
    expired,
    msg_size_raw,
    next_expiry,
    over_limits,
    over_subject_limit,
)
from store.snapshot import SnapshotHeader, iter_snapshot, read_header, write_snapshot
from store.subjects import compile_filters, is_match_all

__all__ = ["FileStreamStore"]

log = logging.getLogger(__name__)

_RESTORE_DIR = "restore.tmp"
_RESTORE_MARKER = "RESTORE.ready"
_SEG_SUFFIX = ".tjs"


class FileStreamStore:
    """A ``StreamStore`` in a directory of segment files.

    Args:
        directory: The stream's directory (created if missing).  One writer.
        limits: Initial limits.
        segment_bytes_max: Seal the active segment past this many body bytes.
        compression: lz4-compress sealed segments.
        sync_policy: Reported to the owner; see ``store.api``.
        sync_interval_s: With ``SyncPolicy.INTERVAL``, how often the owner
            should call ``sync()``.
        verify_on_open: Check the CRC of every sealed segment against its
            checkpoint at open (reads every byte once); if False only sizes
            are checked and record CRCs are verified when read.

    Raises:
        OSError: the directory cannot be used.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        limits: StreamLimits | None = None,
        *,
        segment_bytes_max: int = 8 << 20,
        compression: bool = False,
        sync_policy: SyncPolicy = SyncPolicy.ALWAYS,
        sync_interval_s: float = 120.0,
        verify_on_open: bool = True,
    ) -> None:
        if not 0 < segment_bytes_max <= 1 << 30:
            raise ValueError("segment_bytes_max must be in (0, 1 GiB]")
        self._dir = Path(directory)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._limits = (limits or StreamLimits()).normalised()
        self._seg_max = segment_bytes_max
        self._compression = compression
        self._policy = sync_policy
        self._interval = sync_interval_s
        self._verify = verify_on_open
        self._closed = False
        self._cache: dict[tuple[str, int], bytes] = {}
        self._open_fds: list[Segment] = []
        self._load()

    # ================================================================== loading

    def _reset_memory(self) -> None:
        self._segs: list[Segment] = []
        self._bases: list[int] = []
        self._subjects: list[str] = []
        self._sid_of: dict[str, int] = {}
        self._sid_of_b: dict[bytes, int] = {}
        self._scount = array("q")
        self._sfirst = array("q")
        self._slast = array("q")
        self._stale_first: set[int] = set()
        self._stale_last: set[int] = set()
        self._nsubj = 0
        self._msgs = 0
        self._bytes = 0
        self._last_seq = 0
        self._last_ts = 0
        self._first = 0
        self._first_ts: int | None = None
        self._pending_tombs = array("Q")
        self._cache.clear()

    def _intern_b(self, subj: bytes) -> int:
        sid = self._sid_of_b.get(subj)
        if sid is None:
            s = subj.decode()
            sid = self._sid_of.get(s)
            if sid is None:
                sid = len(self._subjects)
                self._subjects.append(s)
                self._sid_of[s] = sid
                self._scount.append(0)
                self._sfirst.append(0)
                self._slast.append(0)
            self._sid_of_b[subj] = sid
        return sid

    def _finish_pending_restore(self) -> None:
        stage = self._dir / _RESTORE_DIR
        marker = self._dir / _RESTORE_MARKER
        if marker.exists():
            names = set(marker.read_text().split())
            for p in self._dir.iterdir():
                if p.is_file() and p.name not in names and p.name != _RESTORE_MARKER:
                    if p.suffix in (_SEG_SUFFIX, ".idx", ".tmp"):
                        p.unlink()
            if stage.exists():
                for p in stage.iterdir():
                    os.replace(p, self._dir / p.name)
                fsync_dir(self._dir)
                shutil.rmtree(stage)
            marker.unlink()
            fsync_dir(self._dir)
        elif stage.exists():
            shutil.rmtree(stage)

    def _load(self) -> None:
        self._finish_pending_restore()
        for p in self._dir.glob("*.tmp"):
            p.unlink()
        self._reset_memory()
        report = RecoveryReport()
        names = sorted(p.name for p in self._dir.glob("seg-*" + _SEG_SUFFIX))
        pend = []
        for k, name in enumerate(names):
            scan = open_segment(
                self._dir,
                name,
                is_last=k == len(names) - 1,
                intern=self._intern_b,
                verify=self._verify,
            )
            if scan is None:
                base = int(name[4:24])
                nxt = int(names[k + 1][4:24]) if k + 1 < len(names) else base
                report.damaged.append(
                    _damaged(name, 0, (self._dir / name).stat().st_size, base, nxt - 1, "header")
                )
                os.replace(self._dir / name, self._dir / (name + ".damaged"))
                continue
            if scan.rebuilt:
                report.index_rebuilt.append(name)
            report.torn_tail_bytes += scan.torn_tail_bytes
            pend.append((scan.seg, scan.damage))
            self._segs.append(scan.seg)
        for k, (_seg, dmg) in enumerate(pend):
            nxt_base = pend[k + 1][0].base if k + 1 < len(pend) else None
            for d in dmg:
                if d.last_seq < 0 and nxt_base is not None:
                    d.last_seq = nxt_base - 1
                report.damaged.append(d.freeze())
        report.lost_seqs = sum(d.last_seq - d.first_seq + 1 for d in report.damaged if d.last_seq)
        self._report = report
        if report.damaged:
            log.warning("store_recovery dir=%s damaged=%s", self._dir, report.damaged)
        self._bases = [s.base for s in self._segs]
        self._apply_deletions()
        self._derive_totals()
        self._ensure_active()

    def _apply_deletions(self) -> None:
        floor = max([max(s.hdr_floor, s.floor) for s in self._segs] or [0])
        changed: set[int] = set()
        for k, seg in enumerate(self._segs):
            if seg.base < floor and seg.nlive:
                n = min(len(seg.offs), floor - seg.base)
                if seg.live.find(1, 0, n) >= 0:
                    seg.live[0:n] = bytes(n)
                    changed.add(k)
        for seg in self._segs:
            for t in seg.tombs:
                if t < floor:
                    continue
                k = bisect.bisect_right(self._bases, t) - 1
                if k < 0:
                    continue
                s2 = self._segs[k]
                i = t - s2.base
                if i < len(s2.live) and s2.live[i]:
                    s2.live[i] = 0
                    changed.add(k)
        for k in changed:
            seg = self._segs[k]
            seg.nlive = seg.live.count(1)
            seg.lbytes = sum(compress(seg.sizes, seg.live))
            seg.stats = None
            seg.idx_dirty = True

    def _derive_totals(self) -> None:
        last_seq = 0
        last_ts = 0
        for seg in self._segs:
            self._msgs += seg.nlive
            self._bytes += seg.lbytes
            if seg.offs:
                if seg.last_msg_seq >= last_seq:
                    last_seq, last_ts = seg.last_msg_seq, seg.last_ts
            if seg.base - 1 >= last_seq and not seg.offs:
                last_seq, last_ts = seg.base - 1, seg.prev_last_ts
            stats = seg.stats if seg.stats is not None else seg.compute_stats()
            seg.stats = None
            for sid, (c, f, last) in stats.items():
                if c <= 0:
                    continue
                if self._scount[sid] == 0:
                    self._sfirst[sid] = f
                    self._nsubj += 1
                self._scount[sid] += c
                self._slast[sid] = last
        self._last_seq = last_seq
        self._last_ts = last_ts
        self._first = self._next_live(0)

    def _ensure_active(self) -> None:
        if not self._segs:
            seg = Segment.create(self._dir, self._last_seq + 1, self._last_ts, self._floor())
            self._add_seg(seg)
            return
        act = self._segs[-1]
        if act.compressed or act.sealed:
            self._roll()

    def _add_seg(self, seg: Segment) -> None:
        self._segs.append(seg)
        self._bases.append(seg.base)

    # ================================================================== helpers

    @property
    def _active(self) -> Segment:
        return self._segs[-1]

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("store is closed")

    def _floor(self) -> int:
        return self._first if self._msgs else self._last_seq + 1

    def _locate(self, seq: int) -> tuple[Segment, int] | None:
        k = bisect.bisect_right(self._bases, seq) - 1
        if k < 0:
            return None
        seg = self._segs[k]
        i = seq - seg.base
        if i >= len(seg.offs):
            return None
        return seg, i

    def _is_live(self, seq: int) -> bool:
        loc = self._locate(seq)
        return loc is not None and bool(loc[0].live[loc[1]])

    def _next_live(self, start: int) -> int:
        k = max(0, bisect.bisect_right(self._bases, start) - 1)
        for seg in self._segs[k:]:
            if not seg.nlive:
                continue
            j = seg.live.find(1, max(0, start - seg.base))
            if j >= 0:
                return seg.base + j
        return 0

    def _prev_live(self, end: int) -> int:
        """Largest live sequence <= end, or 0."""
        k = bisect.bisect_right(self._bases, end) - 1
        while k >= 0:
            seg = self._segs[k]
            if seg.nlive:
                j = seg.live.rfind(1, 0, max(0, end - seg.base + 1))
                if j >= 0:
                    return seg.base + j
            k -= 1
        return 0

    def _track_fd(self, seg: Segment) -> None:
        if seg is self._active:
            return
        if seg in self._open_fds:
            return
        self._open_fds.append(seg)
        if len(self._open_fds) > 32:
            old = self._open_fds.pop(0)
            if old is not self._active:
                old.close_fd()

    def _read(self, seg: Segment, i: int) -> StoredMsg:
        self._track_fd(seg)
        return seg.read_msg(i, self._cache)

    def _first_ts_value(self) -> int:
        if not self._msgs:
            return 0
        if self._first_ts is None:
            loc = self._locate(self._first)
            if loc is None:
                raise InvariantViolation(f"first seq {self._first} not indexed")
            self._first_ts = self._read(*loc).ts_ns
        return self._first_ts

    def _resolve_first(self, sid: int) -> int:
        if sid not in self._stale_first:
            return self._sfirst[sid]
        start = self._sfirst[sid]
        k = max(0, bisect.bisect_right(self._bases, start) - 1)
        for seg in self._segs[k:]:
            j = max(0, start - seg.base)
            sids, live = seg.sids, seg.live
            try:
                while True:
                    j = sids.index(sid, j)
                    if live[j]:
                        self._sfirst[sid] = seg.base + j
                        self._stale_first.discard(sid)
                        return seg.base + j
                    j += 1
            except ValueError:
                continue
        raise InvariantViolation(f"subject {self._subjects[sid]!r} has no first message")

    def _resolve_last(self, sid: int) -> int:
        if sid not in self._stale_last:
            return self._slast[sid]
        end = self._slast[sid]
        k = bisect.bisect_right(self._bases, end) - 1
        while k >= 0:
            seg = self._segs[k]
            hi = min(len(seg.sids), end - seg.base + 1)
            rev = seg.sids[:hi][::-1]
            j = 0
            try:
                while True:
                    j = rev.index(sid, j)
                    if seg.live[hi - 1 - j]:
                        seq = seg.base + hi - 1 - j
                        self._slast[sid] = seq
                        self._stale_last.discard(sid)
                        return seq
                    j += 1
            except ValueError:
                k -= 1
        raise InvariantViolation(f"subject {self._subjects[sid]!r} has no last message")

    # ================================================================== mutation core

    def _kill(self, seg: Segment, i: int, *, tomb: bool = True) -> None:
        """Mark entry ``i`` of ``seg`` deleted and update every counter."""
        seq = seg.base + i
        seg.live[i] = 0
        seg.nlive -= 1
        size = seg.sizes[i]
        seg.lbytes -= size
        seg.idx_dirty = True
        self._msgs -= 1
        self._bytes -= size
        sid = seg.sids[i]
        c = self._scount[sid] - 1
        self._scount[sid] = c
        if c == 0:
            self._nsubj -= 1
            self._stale_first.discard(sid)
            self._stale_last.discard(sid)
        else:
            if self._sfirst[sid] == seq:
                self._stale_first.add(sid)
            if self._slast[sid] == seq:
                self._stale_last.add(sid)
        if tomb:
            self._pending_tombs.append(seq)
        if seq == self._first:
            self._first = self._next_live(seq + 1) if self._msgs else 0
            self._first_ts = None

    def _kill_seq(self, seq: int, *, tomb: bool = True) -> bool:
        loc = self._locate(seq)
        if loc is None or not loc[0].live[loc[1]]:
            return False
        self._kill(loc[0], loc[1], tomb=tomb)
        return True

    def _write_msg(self, seq: int, subject: str, headers: bytes, payload: bytes, ts: int) -> None:
        subj_b = subject.encode()
        rec = encode_record(KIND_MSG, seq, ts, subj_b, headers, payload)
        seg = self._active
        if seg.end > 0 and seg.end + len(rec) > self._seg_max:
            seg = self._roll()
        off = seg.write_record(rec)
        gap = seq - seg.next_seq
        if gap > 0:
            add_gap(seg, gap, off)
        sid = self._intern_b(subj_b)
        size = msg_size_raw(len(subj_b), len(headers), len(payload), Accounting.FILE)
        seg.add_entry(off, size, sid, True)
        seg.last_ts = ts
        seg.idx_dirty = True
        self._msgs += 1
        self._bytes += size
        self._last_seq = seq
        self._last_ts = ts
        if self._first == 0:
            self._first = seq
            self._first_ts = ts
        c = self._scount[sid]
        if c == 0:
            self._nsubj += 1
            self._sfirst[sid] = seq
            self._stale_first.discard(sid)
        self._scount[sid] = c + 1
        self._slast[sid] = seq
        self._stale_last.discard(sid)

    def _finish_op(self) -> None:
        """Write the operation's tombstones; drop sealed segments left empty."""
        if self._pending_tombs:
            t = self._pending_tombs
            self._pending_tombs = array("Q")
            self._active.write_record(encode_record(KIND_TOMB, 0, 0, b"", b"", t.tobytes()))
            self._active.tombs.extend(t)
        dead = [s for s in self._segs[:-1] if s.nlive == 0]
        if dead:
            self._remove_segments(dead)

    def _remove_segments(self, dead: list[Segment]) -> None:
        dead_ids = {id(s) for s in dead}
        carry = array("Q")
        floor = self._floor()
        for s in dead:
            for t in s.tombs:
                if t < floor:
                    continue
                loc = self._locate(t)
                if loc is not None and id(loc[0]) not in dead_ids and not loc[0].live[loc[1]]:
                    carry.append(t)
        act = self._active
        act.write_record(encode_record(KIND_FLOOR, floor, 0, b"", b"", b""))
        if carry:
            act.write_record(encode_record(KIND_TOMB, 0, 0, b"", b"", carry.tobytes()))
            act.tombs.extend(carry)
        act.sync()
        for s in dead:
            self._unlink(s)
        fsync_dir(self._dir)
        self._segs = [s for s in self._segs if id(s) not in dead_ids]
        self._bases = [s.base for s in self._segs]

    def _unlink(self, s: Segment) -> None:
        s.close_fd()
        if s in self._open_fds:
            self._open_fds.remove(s)
        for p in (s.path, s.idx_path):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        self._cache.clear()

    def _roll(self, base: int | None = None) -> Segment:
        """Seal the active segment and start a new one at ``base``."""
        old = self._active
        if not old.damaged:
            old.seal()
        else:
            old.sync()
        if self._compression and old.end > 0 and not old.damaged and not old.compressed:
            old.compress_file()
            self._cache.clear()
        if not old.damaged:
            old.checkpoint(self._subjects)
        old.close_fd()
        nb = self._last_seq + 1 if base is None else base
        seg = Segment.create(self._dir, nb, self._last_ts, self._floor())
        self._add_seg(seg)
        return seg

    def _reset_to(self, base: int, last_ts: int) -> int:
        """Drop everything; ``last_seq = base - 1``; returns messages dropped."""
        n = self._msgs
        old = list(self._segs)
        act = self._active
        if act.base == base and not act.offs:
            act.write_record(encode_record(KIND_FLOOR, base, 0, b"", b"", b""))
            act.sync()
            keep = act
            old.remove(act)
        else:
            for s in old:
                s.flush()
            act.seal()
            keep = Segment.create(self._dir, base, last_ts, base)
        for s in old:
            self._unlink(s)
        fsync_dir(self._dir)
        self._reset_memory()
        self._segs = [keep]
        self._bases = [keep.base]
        self._last_seq = base - 1
        self._last_ts = last_ts
        return n

    # ================================================================== properties

    @property
    def sync_policy(self) -> SyncPolicy:
        """The policy the owner should follow (see ``store.api``)."""
        return self._policy

    @property
    def sync_interval_s(self) -> float:
        """Sync period for ``SyncPolicy.INTERVAL``."""
        return self._interval

    @property
    def limits(self) -> StreamLimits:
        """Current (normalised) limits."""
        return self._limits

    @property
    def recovery_report(self) -> RecoveryReport:
        """What the last open (or restore/truncate reload) found."""
        return self._report

    @property
    def directory(self) -> Path:
        """The stream's directory."""
        return self._dir

    # ================================================================== writes

    def append(
        self,
        subject: str,
        headers: bytes,
        payload: bytes,
        ts_ns: int,
        *,
        seq: int | None = None,
    ) -> tuple[int, int]:
        """See ``StreamStore.append``."""
        self._check_open()
        if seq is not None and seq != self._last_seq + 1:
            raise SequenceMismatch(self._last_seq + 1, seq)
        lim = self._limits
        sid = self._sid_of.get(subject)
        cnt = self._scount[sid] if sid is not None else 0
        hl, pl = len(headers), len(payload)
        slen = len(subject.encode()) if not subject.isascii() else len(subject)
        size = msg_size_raw(slen, hl, pl, Accounting.FILE)
        oldest: int | None = None
        if sid is not None and cnt and lim.max_msgs_per_subject > 0:
            loc = self._locate(self._resolve_first(sid))
            oldest = loc[0].sizes[loc[1]] if loc else None
        err = check_append(
            lim,
            msgs=self._msgs,
            bytes_=self._bytes,
            hdr_len=hl,
            payload_len=pl,
            new_size=size,
            subject_msgs=cnt,
            subject_oldest_size=oldest,
        )
        if err is not None:
            raise err()
        new_seq = self._last_seq + 1
        self._write_msg(new_seq, subject, headers, payload, ts_ns)
        if lim.max_msgs_per_subject > 0 or lim.max_msgs > 0 or lim.max_bytes > 0:
            self._enforce_subject(self._sid_of[subject])
            self._enforce_stream()
            self._finish_op()
        return new_seq, ts_ns

    def _enforce_subject(self, sid: int) -> int:
        n = 0
        while self._scount[sid] and over_subject_limit(self._limits, self._scount[sid]):
            self._kill_seq(self._resolve_first(sid))
            n += 1
        return n

    def _enforce_stream(self) -> int:
        n = 0
        while self._msgs and over_limits(self._limits, self._msgs, self._bytes):
            self._kill_seq(self._first)
            n += 1
        return n

    def remove(self, seq: int, *, erase: bool = False) -> None:
        """See ``StreamStore.remove``.

        With ``erase`` the deletion is made durable first, then the record's
        headers and payload are overwritten with random bytes (the record is
        re-checksummed and flagged erased; a compressed segment is rewritten).
        """
        self._check_open()
        if seq > self._last_seq:
            raise StoreEOF("stream store EOF")
        loc = self._locate(seq)
        if loc is None or not loc[0].live[loc[1]]:
            raise MsgNotFound("no message found")
        seg, i = loc
        self._kill(seg, i)
        self._finish_op()
        if erase and any(s is seg for s in self._segs):
            self._active.sync()
            self._erase(seg, i)

    def _erase(self, seg: Segment, i: int) -> None:
        off = seg.offs[i]
        if seg.compressed:
            body = bytearray(seg.body())
            _erase_in(body, off)
            seg.rewrite_uncompressed(bytes(body))
            seg.compress_file()
            self._cache.clear()
            seg.drop_checkpoint()
            return
        if off >= seg.flushed:
            _erase_in(seg.wbuf, off - seg.flushed)
            return
        fd = seg.open_fd()
        total = int.from_bytes(os.pread(fd, 4, SEG_HDR_SIZE + off), "little")
        rec = bytearray(os.pread(fd, total, SEG_HDR_SIZE + off))
        _erase_in(rec, 0)
        os.pwrite(fd, rec, SEG_HDR_SIZE + off)
        os.fsync(seg.open_fd())
        seg.file_crc = None
        seg.drop_checkpoint()

    def purge(
        self, *, filter: str | None = None, seq: int | None = None, keep: int | None = None
    ) -> int:
        """See ``StreamStore.purge``."""
        self._check_open()
        sq = seq or 0
        kp = keep or 0
        if sq == 1:
            return 0
        if filter is None or is_match_all(filter):
            if kp == 0 and sq == 0:
                return self._reset_to(self._last_seq + 1, self._last_ts)
            if sq > 1:
                return self.compact(sq)
            filter = ">"
        match = compile_filters(filter)
        msids = [
            sid
            for sid, s in enumerate(self._subjects)
            if self._scount[sid] > 0 and (match is None or match(s))
        ]
        total = sum(self._scount[sid] for sid in msids)
        if total == 0:
            return 0
        maxp = 0
        if kp > 0:
            if kp >= total:
                return 0
            maxp = total - kp
        last = sq - 1 if sq >= 1 else self._last_seq
        purged = 0
        for s in list(self._iter_matching(set(msids), min(self._resolve_first(x) for x in msids))):
            if s > last:
                break
            self._kill_seq(s)
            purged += 1
            if maxp and purged >= maxp:
                break
        self._finish_op()
        return purged

    def _iter_matching(self, msids: set[int], start: int) -> Iterator[int]:
        """Live sequences >= start whose subject id is in ``msids``, in order."""
        k = max(0, bisect.bisect_right(self._bases, start) - 1)
        for seg in self._segs[k:]:
            if not seg.nlive:
                continue
            j0 = max(0, start - seg.base)
            sids, live, base = seg.sids, seg.live, seg.base
            if len(msids) <= 4:
                found: list[int] = []
                for sid in msids:
                    j = j0
                    try:
                        while True:
                            j = sids.index(sid, j)
                            if live[j]:
                                found.append(j)
                            j += 1
                    except ValueError:
                        pass
                found.sort()
                for j in found:
                    yield base + j
            else:
                for j in range(j0, len(sids)):
                    if live[j] and sids[j] in msids:
                        yield base + j

    def compact(self, seq: int) -> int:
        """See ``StreamStore.compact``."""
        self._check_open()
        if seq <= 0:
            return self._reset_to(self._last_seq + 1, self._last_ts)
        if seq > self._last_seq:
            return self._reset_to(seq, self._last_ts)
        n = 0
        s = self._first
        while self._msgs and 0 < s < seq:
            self._kill_seq(s, tomb=False)
            n += 1
            s = self._first
        if n:
            self._active.write_record(encode_record(KIND_FLOOR, seq, 0, b"", b"", b""))
            self._finish_op()
        return n

    def truncate(self, seq: int) -> None:
        """See ``StreamStore.truncate``.

        Implementation: keep the deletions at or below ``seq`` (re-logged),
        cut the log after ``seq``, start a fresh segment at ``seq + 1`` whose
        header carries the new ``last_ts``, then rebuild the index from disk.
        """
        self._check_open()
        if seq >= self._last_seq:
            return
        seq = max(seq, 0)
        p = self._prev_live(seq)
        new_last_ts = self._read(*self._loc_or_fail(p)).ts_ns if p else 0
        floor = self._first if self._msgs and self._first <= seq else seq + 1
        dead = array("Q")
        for s in self._segs:
            hi = min(len(s.live), seq - s.base + 1)
            lo = max(0, floor - s.base)
            j = s.live.find(0, lo, hi) if hi > lo else -1
            while j >= 0:
                dead.append(s.base + j)
                j = s.live.find(0, j + 1, hi)
        for s in self._segs:
            s.flush()
        keep: list[Segment] = []
        for s in self._segs:
            if s.base > seq:
                self._unlink(s)
                continue
            k = seq - s.base + 1
            if k < len(s.offs) or not s.sealed:
                seal = encode_record(KIND_SEAL, s.base + k - 1, 0, b"", b"", b"")
                body = s.body()[: s.offs[k]] if k < len(s.offs) else s.body()
                s.rewrite_uncompressed(body + seal)
                s.drop_checkpoint()
            keep.append(s)
            s.close_fd()
        fsync_dir(self._dir)
        act = Segment.create(self._dir, seq + 1, new_last_ts, floor)
        act.write_record(encode_record(KIND_FLOOR, floor, 0, b"", b"", b""))
        if dead:
            act.write_record(encode_record(KIND_TOMB, 0, 0, b"", b"", dead.tobytes()))
        act.sync()
        act.close_fd()
        self._open_fds.clear()
        self._load()

    def _loc_or_fail(self, seq: int) -> tuple[Segment, int]:
        loc = self._locate(seq)
        if loc is None:
            raise InvariantViolation(f"seq {seq} not indexed")
        return loc

    def update_limits(self, limits: StreamLimits) -> int:
        """See ``StreamStore.update_limits``."""
        self._check_open()
        self._limits = limits.normalised()
        n = self._enforce_stream()
        if self._limits.max_msgs_per_subject > 0:
            for sid in range(len(self._subjects)):
                if self._scount[sid] > self._limits.max_msgs_per_subject:
                    n += self._enforce_subject(sid)
        self._finish_op()
        return n

    def next_expiry_ns(self) -> int | None:
        """See ``StreamStore.next_expiry_ns``."""
        self._check_open()
        if not self._msgs:
            return None
        return next_expiry(self._limits, self._first_ts_value())

    def expire(self, now_ns: int) -> int:
        """See ``StreamStore.expire``."""
        self._check_open()
        n = 0
        while self._msgs and expired(self._limits, self._first_ts_value(), now_ns):
            self._kill_seq(self._first)
            n += 1
        if n:
            self._finish_op()
        return n

    # ================================================================== reads

    def load(self, seq: int) -> StoredMsg:
        """See ``StreamStore.load``."""
        self._check_open()
        loc = self._locate(seq)
        if loc is None or not loc[0].live[loc[1]]:
            if seq > self._last_seq:
                raise StoreEOF("stream store EOF")
            raise MsgNotFound("no message found")
        return self._read(*loc)

    def _matching_sids(self, filters: Filters) -> list[int] | None:
        """Subject ids with live messages matching; ``None`` = everything."""
        match = compile_filters(filters)
        if match is None:
            return None
        if isinstance(filters, str) and filters in self._sid_of and match(filters):
            sid = self._sid_of[filters]
            return [sid] if self._scount[sid] else []
        return [sid for sid, s in enumerate(self._subjects) if self._scount[sid] > 0 and match(s)]

    def load_next(self, filters: Filters, start_seq: int) -> StoredMsg | None:
        """See ``StreamStore.load_next``."""
        self._check_open()
        if not self._msgs:
            return None
        start = max(start_seq, self._first)
        msids = self._matching_sids(filters)
        if msids is None:
            s = self._next_live(start)
            return self._read(*self._loc_or_fail(s)) if s else None
        if not msids:
            return None
        cands = [sid for sid in msids if self._resolve_last(sid) >= start]
        if not cands:
            return None
        start = max(start, min(self._resolve_first(sid) for sid in cands))
        for s in self._iter_matching(set(cands), start):
            return self._read(*self._loc_or_fail(s))
        return None

    def load_last(self, filters: Filters) -> StoredMsg:
        """See ``StreamStore.load_last``."""
        self._check_open()
        msids = self._matching_sids(filters)
        if msids is None:
            best = self._prev_live(self._last_seq) if self._msgs else 0
        else:
            best = max((self._resolve_last(sid) for sid in msids), default=0)
        if best == 0:
            raise MsgNotFound("no message found")
        return self._read(*self._loc_or_fail(best))

    def _deleted(self, first: int) -> list[int]:
        out: list[int] = []
        nxt = first
        last = self._last_seq
        for seg in self._segs:
            if seg.base > nxt:
                out.extend(range(nxt, min(seg.base, last + 1)))
            lo = max(first, seg.base) - seg.base
            hi = min(last, seg.last_msg_seq) - seg.base + 1
            if hi > lo:
                j = seg.live.find(0, lo, hi)
                while j >= 0:
                    out.append(seg.base + j)
                    j = seg.live.find(0, j + 1, hi)
            nxt = max(nxt, seg.next_seq)
        if nxt <= last:
            out.extend(range(nxt, last + 1))
        return out

    def state(
        self, *, deleted_details: bool = False, subjects_filter: str | None = None
    ) -> StreamState:
        """See ``StreamStore.state``."""
        self._check_open()
        if self._msgs:
            first = self._first
        else:
            first = self._last_seq + 1 if self._last_seq > 0 else 0
        num_deleted = self._last_seq - first + 1 - self._msgs if self._msgs else 0
        subjects = None
        if subjects_filter is not None:
            subjects = {k: v.msgs for k, v in self.subject_state(subjects_filter).items()}
        return StreamState(
            msgs=self._msgs,
            bytes=self._bytes,
            first_seq=first,
            first_ts=self._first_ts_value(),
            last_seq=self._last_seq,
            last_ts=self._last_ts,
            num_subjects=self._nsubj,
            num_deleted=num_deleted,
            deleted=tuple(self._deleted(first))
            if deleted_details and self._msgs
            else (() if deleted_details else None),
            subjects=subjects,
        )

    def subject_state(self, filter: str = ">") -> dict[str, SubjectState]:
        """See ``StreamStore.subject_state``."""
        self._check_open()
        msids = self._matching_sids(filter)
        if msids is None:
            msids = [sid for sid in range(len(self._subjects)) if self._scount[sid] > 0]
        return {
            self._subjects[sid]: SubjectState(
                self._scount[sid], self._resolve_first(sid), self._resolve_last(sid)
            )
            for sid in msids
        }

    def iter_live(self) -> Iterator[StoredMsg]:
        """Every live message in sequence order (verified as read)."""
        for seg in list(self._segs):
            if not seg.nlive:
                continue
            j = seg.live.find(1)
            while j >= 0:
                yield self._read(seg, j)
                j = seg.live.find(1, j + 1)

    # ================================================================== snapshot

    def snapshot(self, out: BinaryIO) -> None:
        """See ``StreamStore.snapshot``."""
        self._check_open()
        st = self.state()
        hdr = SnapshotHeader(st.first_seq, st.last_seq, st.last_ts, st.msgs)
        write_snapshot(out, hdr, self.iter_live())

    def restore(self, src: BinaryIO) -> None:
        """See ``StreamStore.restore``."""
        self._check_open()
        stage_dir = self._dir / _RESTORE_DIR
        if stage_dir.exists():
            shutil.rmtree(stage_dir)
        hdr = read_header(src)
        stage = FileStreamStore(
            stage_dir,
            StreamLimits(),
            segment_bytes_max=self._seg_max,
            compression=self._compression,
            verify_on_open=False,
        )
        try:
            if hdr.first_seq > 1 or hdr.last_seq > 0:
                stage._reset_to(max(hdr.first_seq, 1), hdr.last_ts)
            for m in iter_snapshot(src, hdr):
                stage._write_msg(m.seq, m.subject, m.headers, m.payload, m.ts_ns)
            if hdr.last_seq > stage._last_seq:
                stage._last_ts = hdr.last_ts
                stage._roll(hdr.last_seq + 1)
                stage._last_seq = hdr.last_seq
            stage.close()
        except BaseException:
            stage.close()
            shutil.rmtree(stage_dir, ignore_errors=True)
            raise
        names = sorted(p.name for p in stage_dir.iterdir())
        marker = self._dir / _RESTORE_MARKER
        with open(marker, "w") as f:
            f.write("\n".join(names))
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(self._dir)
        self._close_files()
        self._load()

    # ================================================================== lifecycle

    def sync(self) -> None:
        """See ``StreamStore.sync``: one write + fsync for all buffered records."""
        self._check_open()
        if self._pending_tombs:
            self._finish_op()
        self._active.sync()

    def _close_files(self) -> None:
        for s in self._segs:
            s.close_fd()
        self._open_fds.clear()
        self._cache.clear()

    def close(self) -> None:
        """See ``StreamStore.close``: sync, checkpoint changed segments, close fds."""
        if self._closed:
            return
        self._finish_op()
        self._active.sync()
        for s in self._segs:
            if s.idx_dirty and not s.damaged:
                s.checkpoint(self._subjects)
        self._close_files()
        self._closed = True


def _erase_in(buf: bytearray, pos: int) -> None:
    """Overwrite headers+payload of the record at ``pos`` in ``buf`` with random
    bytes, flag it erased and recompute its CRC."""
    total, kind, _seq, _ts, slen, _hlen = REC_HDR.unpack_from(buf, pos)
    o = pos + REC_HDR.size + slen
    n = total - REC_HDR.size - slen - 4
    buf[o : o + n] = os.urandom(n)
    buf[pos + 4] = kind | KIND_ERASED
    buf[pos + total - 4 : pos + total] = zlib.crc32(buf[pos : pos + total - 4]).to_bytes(
        4, "little"
    )


def _damaged(name: str, a: int, b: int, first: int, last: int, reason: str) -> DamagedRange:
    ok = last >= first
    return DamagedRange(name, a, b, first if ok else 0, last if ok else 0, reason)


if TYPE_CHECKING:

    def _conforms(s: FileStreamStore) -> StreamStore:
        return s
