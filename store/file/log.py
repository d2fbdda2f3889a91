"""``StreamLog``: a stream's directory of append-only segment files.

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
active segment is created (file and directory fsynced).  Every write here
also updates the in-memory index (``store.file.index``, the base class).

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
per-segment summaries.  Unless ``verify_on_open``, a sealed segment is taken
on its checkpoint's word and size (the tail segment's bytes are always
checked, and a torn tail cut): its arrays load on first use, and its file's
CRC and its checkpoint's body are checked when ``recovery_report`` is first
read or a read meets a bad record (``_verify_lazy``).  A mismatch found then
reloads the store with every segment verified, so the report is what an
eager open would have said; reads check every record's CRC meanwhile.
Damage is reported in ``recovery_report`` and never served.  Damaged segments are never checkpointed, so damage is reported at
every open until the data is gone (purged/compacted away).  An open first
finishes a restore whose files were staged and marked (see
``store.file.store``).

*Reads.*  Messages are read through the segment (``Segment.read_msg``) with
a ``store.file.readcache.ReadCache`` shared by all segments: the last
decompressed lz4 chunk and a few read-ahead windows for readers walking
forward.  Its entries are tied to a segment's ``gen`` (bumped by every
in-place change of the segment's bytes) and it is cleared whenever a segment
is removed; besides the active segment, at most 32 segments keep an open
file descriptor.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import zlib
from array import array
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from store.api import DamagedRange, RecoveryReport, StoredMsg
from store.errors import CorruptionError, InvariantViolation, MsgNotFound
from store.file.checkpoint import (
    checkpoint_body_ok,
    fsync_dir,
    read_checkpoint_summary,
    read_file_crc,
)
from store.file.format import (
    KIND_ERASED,
    KIND_FLOOR,
    KIND_MSG,
    KIND_SEAL,
    KIND_TOMB,
    REC_HDR,
    REC_OVERHEAD,
    SEG_HDR_SIZE,
    encode_record,
)
from store.file.index import StreamIndex
from store.file.readcache import ReadCache
from store.file.recovery import add_gap, open_segment
from store.file.segment import Segment
from store.limits import Accounting, msg_size_raw
from store.msgids import id_bytes_and_ttl

__all__ = ["RESTORE_DIR", "RESTORE_MARKER", "SEG_SUFFIX", "StreamLog"]

log = logging.getLogger(__name__)

_U32 = struct.Struct("<I")
#: a message's accounted size (``msg_size_raw``, file) less its record's length:
#: both grow byte for byte with subject, headers and payload
_SIZE_LESS_RECORD = msg_size_raw(0, 0, 0, Accounting.FILE) - REC_OVERHEAD
_SIZE_LESS_RECORD_HDR = msg_size_raw(0, 1, 0, Accounting.FILE) - (REC_OVERHEAD + 1)

RESTORE_DIR = "restore.tmp"
RESTORE_MARKER = "RESTORE.ready"
SEG_SUFFIX = ".tjs"
CRC_THREADS = 2
"""Threads computing sealed segments' CRCs at open."""


def _whole_file_crc(path: Path) -> int:
    return read_file_crc(path, path.stat().st_size)


class StreamLog(StreamIndex):
    """The segment files of one stream, and the index kept in step with them.

    The base of :class:`~store.file.store.FileStreamStore`; see the module
    docstring.  One writer; nothing here checks whether the store is closed.

    Args:
        directory: The stream's directory (created if missing).
        segment_bytes_max: Seal the active segment past this many body bytes.
        compression: lz4-compress sealed segments.
        verify_on_open: Check sealed segments' CRCs against their checkpoints
            at open (True), lazily (None), or never (False).

    Raises:
        OSError: the directory cannot be used.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        segment_bytes_max: int,
        compression: bool,
        verify_on_open: bool | None,
    ) -> None:
        self._dir = Path(directory)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._seg_max = segment_bytes_max
        self._compression = compression
        self._verify = verify_on_open
        self._cache = ReadCache()
        self._open_fds: list[Segment] = []
        self._fd_last: Segment | None = None  # the segment _track_fd saw last
        #: sealed segments opened unverified, each with the ``gen`` it had
        self._unverified: list[tuple[Segment, int]] = []

    # ================================================================== opening

    def _finish_pending_restore(self) -> None:
        stage = self._dir / RESTORE_DIR
        marker = self._dir / RESTORE_MARKER
        if marker.exists():
            names = set(marker.read_text().split())
            for p in self._dir.iterdir():
                if p.is_file() and p.name not in names and p.name != RESTORE_MARKER:
                    if p.suffix in (SEG_SUFFIX, ".idx", ".tmp"):
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

    def _load(self, verify: bool | None = None) -> None:
        lazy_check = verify is None and self._verify is None
        verify = bool(self._verify) if verify is None else verify
        for s in getattr(self, "_segs", ()):  # background checkpoints land first
            s.wait_checkpoint()
        self._finish_pending_restore()
        for p in self._dir.glob("*.tmp"):
            p.unlink()
        self._reset_memory()
        report = RecoveryReport()
        names = sorted(p.name for p in self._dir.glob("seg-*" + SEG_SUFFIX))
        pend = []
        # sealed segments are verified against their checkpoints' CRCs; the
        # CRCs are computed ahead by a few threads (zlib releases the GIL), so
        # reading and checking them overlaps the (GIL-bound) index loading
        pool = None
        crcs: dict[str, Future[int]] = {}
        if verify and len(names) > 2:
            pool = ThreadPoolExecutor(max_workers=CRC_THREADS, thread_name_prefix="seg-crc")
            for name in names[:-1]:
                path = self._dir / name
                crcs[name] = pool.submit(_whole_file_crc, path)
        try:
            scans = [
                open_segment(
                    self._dir,
                    name,
                    is_last=k == len(names) - 1,
                    intern=self._intern_b,
                    verify=verify,
                    file_crc=crcs[name].result if name in crcs else None,
                    intern_many=self._intern_many,
                    intern_bulk=self._intern_bulk,
                    on_bad=None if verify else self._rebuild_body,
                )
                for k, name in enumerate(names)
            ]
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        for k, (name, scan) in enumerate(zip(names, scans, strict=True)):
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
        self._unverified = (
            [(s, s.gen) for s in self._segs[:-1] if not s.loaded] if lazy_check else []
        )
        self._apply_deletions()
        self._derive_totals()
        self._ensure_active()

    def _verify_lazy(self) -> None:
        """Check what an open took on trust (see the module docstring)."""
        pend, self._unverified = self._unverified, []
        live = {id(s) for s in self._segs}
        bad = []
        for s, gen in pend:
            if id(s) not in live or s.gen != gen or s.file_crc is None:
                continue  # changed or gone since: rewritten and checkpointed afresh
            s.wait_checkpoint()
            if read_file_crc(s.path, s.file_size) != s.file_crc:
                bad.append(s.name)
            elif not s.idx_dirty and not _body_ok(s):
                bad.append(s.idx_path.name)
        if bad:
            log.warning("store_lazy_verify dir=%s mismatch=%s: reloading verified", self._dir, bad)
            for s, _gen in pend:  # rescanned at every open from now on
                if s.name in bad or s.idx_path.name in bad:
                    s.drop_checkpoint()
            self._active.sync()
            self._close_files()
            self._load(verify=True)

    def _rebuild_body(self, seg: Segment) -> None:
        """Rebuild the arrays of a lazily opened segment whose checkpoint body
        failed: scan its file, then apply the floor and every tombstone."""
        scan = open_segment(self._dir, seg.name, is_last=False, intern=self._intern_b, verify=True)
        if scan is None or scan.damage or scan.seg.nent != seg.nent:
            log.error("event=segment_rebuild_mismatch path=%s", seg.path)
        src = scan.seg if scan is not None else None
        n = seg.nent
        for name in ("offs", "sizes", "sids"):
            a = array("I", getattr(src, name)[:n]) if src is not None else array("I")
            a.extend(array("I", bytes(4 * (n - len(a)))))
            setattr(seg, name, a)
        live = bytearray(src.live[:n]) if src is not None else bytearray()
        live.extend(bytes(n - len(live)))
        seg.live = live
        for name in ("ch_lstart", "ch_foff", "ch_rlen", "ch_clen"):
            setattr(seg, name, getattr(src, name) if src is not None else array("Q"))
        floor = max([max(s.hdr_floor, s.floor) for s in self._segs] or [0])
        if floor > seg.base:
            k = min(n, floor - seg.base)
            live[0:k] = bytes(k)
        for s in self._segs:
            for t in s.tombs:
                if 0 <= t - seg.base < n:
                    live[t - seg.base] = 0
        if live.count(1) != seg.nlive:
            log.error("event=segment_rebuild_live_mismatch path=%s", seg.path)
        seg.idx_dirty = True

    def _reset_memory(self) -> None:
        self._reset_index()
        self._cache.clear()

    def _ensure_active(self) -> None:
        if not self._segs:
            seg = Segment.create(self._dir, self._last_seq + 1, self._last_ts, self._floor())
            self._add_seg(seg)
            return
        act = self._segs[-1]
        if act.compressed or act.sealed:
            self._roll()

    # ================================================================== reads

    def _track_fd(self, seg: Segment) -> None:
        self._fd_last = seg
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
        if seg is not self._fd_last:
            self._track_fd(seg)
        try:
            return seg.read_msg(i, self._cache)
        except CorruptionError:
            if not self._unverified:
                raise
        self._verify_lazy()  # damage in a segment taken on trust: reload, verified
        seq = seg.base + i
        loc = self._locate(seq)
        if loc is None or not loc[0].live[loc[1]]:
            raise MsgNotFound("no message found")
        return loc[0].read_msg(loc[1], self._cache)

    def _first_ts_value(self) -> int:
        if not self._msgs:
            return 0
        if self._first_ts is None:
            loc = self._locate(self._first)
            if loc is None:
                raise InvariantViolation(f"first seq {self._first} not indexed")
            self._first_ts = self._read(*loc).ts_ns
        return self._first_ts

    # ================================================================== writes

    def _write_msg(self, seq: int, subject: str, headers: bytes, payload: bytes, ts: int) -> None:
        subj_b = subject.encode()
        rec = encode_record(KIND_MSG, seq, ts, subj_b, headers, payload)
        seg = self._active
        # roll only a segment holding messages: one with only FLOOR/TOMB
        # records has base == seq, and a new segment at seq would reuse its
        # file name (creating it truncated the old file)
        if seg.offs and seg.end + len(rec) > self._seg_max:
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
        if headers:
            mid, ttl = id_bytes_and_ttl(headers)
            if mid and seg.mids is not None:
                seg.mids.append((mid, seq, ts))
            if ttl and seg.ttls is not None:
                seg.ttls.append((seq, ts, ttl))
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

    def _write_msgs(self, msgs: Sequence[tuple[str, bytes, bytes, int]]) -> None:
        """``_write_msg`` for a run of messages at ``last_seq + 1``, ``+ 2`` …

        The same records, index entries and totals as one ``_write_msg`` per
        message, built in one pass: the records of a segment go to it as one
        write, its index arrays are extended once, the per-subject counts are
        summed per subject (a run usually has one or a few).
        """
        i, n = 0, len(msgs)
        while i < n:
            took = self._write_msgs_seg(msgs, i)
            if not took:
                self._roll()  # the active segment is full
                continue
            i += took

    def _write_msgs_seg(self, msgs: Sequence[tuple[str, bytes, bytes, int]], i: int) -> int:
        """Write ``msgs[i:]`` into the active segment as far as it takes them
        (it rolls past ``segment_bytes_max``); how many it took (0: full)."""
        pack, crc32, u32 = REC_HDR.pack, zlib.crc32, _U32.pack
        seg = self._active
        room = self._seg_max - seg.end  # a segment holding messages rolls past it
        empty = not seg.offs
        seq0 = seq = self._last_seq + 1
        enc: dict[str, bytes] = {}
        recs: list[bytes] = []
        rec_lens: list[int] = []
        subjects: list[bytes] = []
        hdr_msgs: list[tuple[int, int, bytes]] = []
        used = 0
        ts = 0
        for subject, headers, payload, ts in msgs[i:] if i else msgs:
            subj_b = enc.get(subject)
            if subj_b is None:
                subj_b = enc[subject] = subject.encode()
            hl = len(headers)
            body = (
                pack(
                    REC_OVERHEAD + len(subj_b) + hl + len(payload),
                    KIND_MSG,
                    seq,
                    ts,
                    len(subj_b),
                    hl,
                )
                + subj_b
                + headers
                + payload
            )
            rec_len = len(body) + 4
            if used + rec_len > room and not (empty and not recs):
                break
            recs.append(body)
            recs.append(u32(crc32(body)))
            rec_lens.append(rec_len)
            subjects.append(subj_b)
            used += rec_len
            if hl:
                hdr_msgs.append((seq, ts, headers))
            seq += 1
        k = len(rec_lens)
        if not k:
            return 0
        ts = msgs[i + k - 1][3]
        end0 = seg.end
        if seg.write_record(b"".join(recs)) != end0:
            raise InvariantViolation("segment offset moved under a batched write")
        gap = seq0 - seg.next_seq
        if gap > 0:
            add_gap(seg, gap, end0)
        # offsets: a running sum; sizes (``msg_size_raw``, file accounting) differ
        # from the record's length by a constant (another with headers)
        offs = array("I", [end0])
        off = end0
        for ln in rec_lens[:-1]:
            off += ln
            offs.append(off)
        seg.offs.extend(offs)
        sizes = array("I", [x + _SIZE_LESS_RECORD for x in rec_lens])
        for hseq, _, _ in hdr_msgs:
            sizes[hseq - seq0] += _SIZE_LESS_RECORD_HDR - _SIZE_LESS_RECORD
        seg.sizes.extend(sizes)
        total = sum(sizes)
        intern = self._intern_b
        if len(enc) == 1:
            subj_b = subjects[0]
            sid = intern(subj_b)
            seg.sids.extend(array("I", [sid]) * k)
            per_subject = {sid: (k, seq0, seq0 + k - 1)}
        else:
            sids = array("I", [intern(b) for b in subjects])
            seg.sids.extend(sids)
            per: dict[int, list[int]] = {}
            for j, sid in enumerate(sids):
                r = per.get(sid)
                if r is None:
                    per[sid] = [1, seq0 + j, seq0 + j]
                else:
                    r[0] += 1
                    r[2] = seq0 + j
            per_subject = {sid: (r[0], r[1], r[2]) for sid, r in per.items()}
        seg.live.extend(b"\x01" * k)
        seg.nlive += k
        seg.lbytes += total
        seg.last_ts = ts
        seg.idx_dirty = True
        mids, ttls = seg.mids, seg.ttls
        for hseq, hts, headers in hdr_msgs:
            mid, ttl = id_bytes_and_ttl(headers)
            if mid and mids is not None:
                mids.append((mid, hseq, hts))
            if ttl and ttls is not None:
                ttls.append((hseq, hts, ttl))
        self._msgs += k
        self._bytes += total
        self._last_seq = seq0 + k - 1
        self._last_ts = ts
        if self._first == 0:
            self._first = seq0
            self._first_ts = msgs[i][3]
        scount, sfirst, slast = self._scount, self._sfirst, self._slast
        for sid, (cnt, s_first, s_last) in per_subject.items():
            c = scount[sid]
            if c == 0:
                self._nsubj += 1
                sfirst[sid] = s_first
                self._stale_first.discard(sid)
            scount[sid] = c + cnt
            slast[sid] = s_last
            self._stale_last.discard(sid)
        return k

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
        s.wait_checkpoint()
        s.close_fd()
        self._fd_last = None
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
            # in the background: with many distinct subjects (a KV bucket) it
            # takes a second or more, and a roll happens inside an apply, on
            # every replica's event loop at the same message
            old.checkpoint_later(self._subjects)
            old.n_mids = len(old.mids) if old.mids is not None else None
            old.mids = None  # kept by the checkpoint from now on
            if not old.ttls_lost:
                old.ttls = None
        old.close_fd()
        self._fd_last = None
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

    def _cut_after(self, seq: int) -> None:
        """Truncate the log after ``seq`` (>= 0, < last seq); see ``truncate``."""
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
        self._fd_last = None
        self._load()

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
        seg.overwrite(off, rec)
        seg.drop_checkpoint()

    # ================================================================== files

    def _close_files(self) -> None:
        for s in self._segs:
            s.close_fd()
        self._open_fds.clear()
        self._fd_last = None
        self._cache.clear()


def _body_ok(s: Segment) -> bool:
    got = read_checkpoint_summary(s.idx_path)
    return got is not None and checkpoint_body_ok(s.idx_path, got[1])


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
