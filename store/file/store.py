"""``FileStreamStore``: a stream kept in append-only segment files.

Theory of operation
-------------------
Four layers, each a class in its own module, each the base of the next:

* ``store.file.index.StreamIndex`` -- the in-memory index: segments'
  compact arrays, per-subject count/first/last, totals.  No I/O.
* ``store.file.log.StreamLog`` -- the segment files: appending records,
  tombstones and floors, sealing/compressing/rolling segments, removing empty
  ones, erasing, recovery at open, reads through a bounded fd set.  Durability
  and recovery rules are there.
* ``store.file.expiry.ExpiringLog`` -- what ages out (``max_age``) or expires
  (``Nats-TTL``), and the TTL index rebuilt at open.
* ``FileStreamStore`` (here) -- the ``StreamStore`` protocol on top: argument
  checks, limits (discard, per-subject caps) as decisions of
  ``store.limits`` carried out by deleting through the index, reads and
  state, snapshot/restore, sync and close.  Every public method but the
  expiry ones is here.

*Restore.*  A snapshot is staged into ``restore.tmp/`` as a complete store,
then a marker listing the staged files is written and the files are moved in;
a crash during the move is finished at the next open.
"""

from __future__ import annotations

import os
import shutil
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from itertools import compress, islice
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeVar

from store.api import (
    Filters,
    RawRun,
    RecoveryReport,
    StoredMsg,
    StreamState,
    StreamStore,
    SubjectState,
    SyncPolicy,
    append_each,
)
from store.errors import (
    CorruptionError,
    LimitExceeded,
    MsgNotFound,
    SequenceMismatch,
    StoreClosed,
    StoreEOF,
)
from store.file.checkpoint import fsync_dir
from store.file.expiry import ExpiringLog
from store.file.format import (
    KIND_FLOOR,
    encode_record,
)
from store.file.log import RESTORE_DIR, RESTORE_MARKER
from store.limits import (
    Accounting,
    StreamLimits,
    check_append,
    msg_size_raw,
    over_limits,
    over_subject_limit,
)
from store.msgids import msg_id_of
from store.snapshot import SnapshotHeader, iter_snapshot, read_header, write_snapshot
from store.subjects import compile_filters, is_match_all
from store.ttl import TtlIndex

__all__ = ["FileStreamStore"]


_R = TypeVar("_R")


class FileStreamStore(ExpiringLog):
    """A ``StreamStore`` in a directory of segment files.

    Args:
        directory: The stream's directory (created if missing).  One writer.
        limits: Initial limits.
        segment_bytes_max: Seal the active segment past this many body bytes.
        compression: lz4-compress sealed segments.
        sync_policy: Reported to the owner; see ``store.api``.
        sync_interval_s: With ``SyncPolicy.INTERVAL``, how often the owner
            should call ``sync()``.
        verify_on_open: True: check the CRC of every sealed segment against
            its checkpoint at open (reads every byte once).  None (the
            default): only sizes are checked at open and sealed segments'
            indexes load on first use; record CRCs are verified when read,
            and the whole check runs when ``recovery_report`` is first read
            or a read meets a bad record (damage found then reloads the store
            verified: it becomes gaps, as an eager open would have made it).
            False: as None, but never checked beyond each record read (a bad
            record raises ``CorruptionError``).

    Raises:
        OSError: the directory cannot be used.
    """

    raw_runs = True  # records read into a RawRun without a StoredMsg each (Segment.read_run given a RawRun)

    def __init__(
        self,
        directory: str | os.PathLike[str],
        limits: StreamLimits | None = None,
        *,
        segment_bytes_max: int = 8 << 20,
        compression: bool = False,
        sync_policy: SyncPolicy = SyncPolicy.ALWAYS,
        sync_interval_s: float = 120.0,
        verify_on_open: bool | None = None,
    ) -> None:
        if not 0 < segment_bytes_max <= 1 << 30:
            raise ValueError("segment_bytes_max must be in (0, 1 GiB]")
        super().__init__(
            directory,
            segment_bytes_max=segment_bytes_max,
            compression=compression,
            verify_on_open=verify_on_open,
        )
        self._limits = (limits or StreamLimits()).normalised()
        self._ttls = TtlIndex()
        self._ageing: tuple[int, int] | None = None
        self._policy = sync_policy
        self._interval = sync_interval_s
        self._closed = False
        self._load()

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
        """What the last open (or restore/truncate reload) found; sealed
        segments taken on trust at open are verified first (once)."""
        if self._unverified and not self._closed:
            self._verify_lazy()
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
        if headers:
            self._ttls.note(new_seq, headers, ts_ns, honour_ttl=lim.msg_ttl)
        if lim.max_msgs_per_subject > 0 or lim.max_msgs > 0 or lim.max_bytes > 0:
            self._enforce_subject(self._sid_of[subject])
            self._enforce_stream()
            self._finish_op()
        return new_seq, ts_ns

    def append_batch(
        self, msgs: Sequence[tuple[str, bytes, bytes, int]]
    ) -> tuple[int, LimitExceeded | None]:
        """See ``StreamStore.append_batch``.

        Without count, byte, per-subject or size limits nothing can refuse or
        evict a message: the run is written by ``StreamLog._write_msgs`` (one
        write and one index pass per segment).  Otherwise one ``append`` each.
        """
        self._check_open()
        lim = self._limits
        if (
            lim.max_msgs > 0
            or lim.max_bytes > 0
            or lim.max_msgs_per_subject > 0
            or lim.max_msg_size >= 0
        ):
            return append_each(self.append, msgs)
        if not msgs:
            return 0, None
        seq = self._last_seq + 1
        self._write_msgs(msgs)
        honour = lim.msg_ttl
        note = self._ttls.note
        for _subject, headers, _payload, ts_ns in msgs:
            if headers:
                note(seq, headers, ts_ns, honour_ttl=honour)
            seq += 1
        return len(msgs), None

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

    def skip(self, seq: int) -> None:
        """See ``StreamStore.skip``.

        Only ``last_seq`` moves here: the next append writes its record with
        the gap (the segment index holds dead entries for it, as recovery
        rebuilds them), so a skip followed by a message costs nothing.  A
        skip still pending at ``sync``/``close`` is made durable by starting
        a segment at ``seq + 1`` (``_settle_skip``).
        """
        self._check_open()
        if seq > self._last_seq:
            self._last_seq = seq

    def _settle_skip(self) -> None:
        """Make a trailing skip durable: a new segment based past it."""
        if self._last_seq <= self._active.last_msg_seq:
            return
        if self._msgs:
            self._roll(self._last_seq + 1)
        else:
            self._reset_to(self._last_seq + 1, self._last_ts)

    def truncate(self, seq: int) -> None:
        """See ``StreamStore.truncate``.

        Implementation: keep the deletions at or below ``seq`` (re-logged),
        cut the log after ``seq``, start a fresh segment at ``seq + 1`` whose
        header carries the new ``last_ts``, then rebuild the index from disk.
        """
        self._check_open()
        if seq >= self._last_seq:
            return
        self._cut_after(max(seq, 0))

    def update_limits(self, limits: StreamLimits) -> int:
        """See ``StreamStore.update_limits``."""
        self._check_open()
        ttl_changed = limits.msg_ttl != self._limits.msg_ttl
        self._limits = limits.normalised()
        if ttl_changed:
            self._reindex_ttls()
        n = self._enforce_stream()
        if self._limits.max_msgs_per_subject > 0:
            for sid in range(len(self._subjects)):
                if self._scount[sid] > self._limits.max_msgs_per_subject:
                    n += self._enforce_subject(sid)
        self._finish_op()
        return n

    # ================================================================== reads

    def load(self, seq: int) -> StoredMsg:
        """See ``StreamStore.load`` (``_read_verified``'s retry written out: no
        closure per message on this path)."""
        try:
            return self._load_one(seq)
        except CorruptionError:
            if not self._unverified:
                raise
        self._verify_lazy()
        return self._load_one(seq)

    def _read_verified(self, read: Callable[[], _R]) -> _R:
        """``read()``; once more after a reload, verified, when it met damage in
        a segment taken on trust at open."""
        try:
            return read()
        except CorruptionError:
            if not self._unverified:
                raise
        self._verify_lazy()
        return read()

    def _load_one(self, seq: int) -> StoredMsg:
        if self._closed:
            raise StoreClosed("store is closed")
        k = bisect_right(self._bases, seq) - 1  # _locate + _read, inlined: hot
        if k >= 0:
            seg = self._segs[k]
            i = seq - seg.base
            if i < len(seg.offs) and seg.live[i]:
                if seg is not self._fd_last:
                    self._track_fd(seg)
                return seg.read_msg(i, self._cache)
        if seq > self._last_seq:
            raise StoreEOF("stream store EOF")
        raise MsgNotFound("no message found")

    def load_run(self, start_seq: int, max_msgs: int) -> list[StoredMsg]:
        """See ``StreamStore.load_run``: each segment's part is read by
        ``Segment.read_run`` (consecutive records parsed from one buffer)."""
        return self._read_verified(lambda: self._load_run(start_seq, max_msgs))

    def load_raw_run(self, start_seq: int, max_msgs: int) -> RawRun:
        """See ``StreamStore.load_raw_run``: ``load_run``'s walk, each segment's
        part read into the run by ``Segment.read_run``."""

        def read() -> RawRun:
            rr = RawRun()
            self._load_run(start_seq, max_msgs, rr)
            return rr

        return self._read_verified(read)

    def _load_run(self, start_seq: int, max_msgs: int, rr: RawRun | None = None) -> list[StoredMsg]:
        """The run as a list, or (given ``rr``) read into ``rr`` (the list stays empty)."""
        if self._closed:
            raise StoreClosed("store is closed")
        out: list[StoredMsg] = []
        got = out if rr is None else rr.seqs  # what counts the messages read
        segs = self._segs
        k = bisect_right(self._bases, start_seq) - 1
        cache = self._cache
        if max_msgs == 1 and k >= 0 and rr is None:  # one live message: read_msg is shorter
            seg = segs[k]
            i = start_seq - seg.base
            if i < len(seg.offs) and seg.live[i]:
                if seg is not self._fd_last:
                    self._track_fd(seg)
                out.append(seg.read_msg(i, cache))
                return out
        k = max(k, 0)
        while k < len(segs) and len(got) < max_msgs:
            seg = segs[k]
            i = max(0, start_seq - seg.base)
            if i < len(seg.offs):
                if seg is not self._fd_last:
                    self._track_fd(seg)
                seg.read_run(i, max_msgs - len(got), cache, out, rr)
            k += 1
        return out

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

    def load_next_run(self, filters: Filters, start_seq: int, max_msgs: int) -> list[StoredMsg]:
        """See ``StreamStore.load_next_run``."""
        self._check_open()
        if not self._msgs or max_msgs <= 0:
            return []
        start = max(start_seq, self._first)
        msids = self._matching_sids(filters)
        if msids is None or len(msids) == self._nsubj:  # every subject held
            return self.load_run(start, max_msgs)
        cands = [sid for sid in msids if self._resolve_last(sid) >= start]
        if not cands:
            return []
        start = max(start, min(self._resolve_first(sid) for sid in cands))
        seqs = list(islice(self._iter_matching(set(cands), start), max_msgs))
        if len(seqs) > 1 and seqs[-1] - seqs[0] + 1 == len(seqs):
            # the matches are consecutive (every one live): one run read,
            # records parsed from one buffer, instead of one read per message
            run = self.load_run(seqs[0], len(seqs))
            if len(run) == len(seqs) and run[-1].seq == seqs[-1]:
                return run
        return [self._read(*self._loc_or_fail(q)) for q in seqs]

    def count_in_range(self, filters: Filters, lo: int, hi: int) -> int:
        """See ``StreamStore.count_in_range``: per segment, a C-level count
        over the slice of its subject ids (live ones only)."""
        self._check_open()
        lo, hi = max(lo, self._first), min(hi, self._last_seq)
        if not self._msgs or lo > hi:
            return 0
        msids = self._matching_sids(filters)
        if msids is not None and len(msids) == self._nsubj:
            msids = None
        if msids is not None and not msids:
            return 0
        wanted = None if msids is None else set(msids)
        n = 0
        k = max(0, bisect_right(self._bases, lo) - 1)
        for seg in self._segs[k:]:
            if seg.base > hi:
                break
            if not seg.nlive:
                continue
            a = max(lo - seg.base, 0)
            b = min(hi - seg.base + 1, seg.nent)
            if a >= b:
                continue
            if wanted is None and a == 0 and b == seg.nent:
                n += seg.nlive  # the whole segment: its count, not its arrays
                continue
            if wanted is None:
                n += seg.live.count(1, a, b)
                continue
            if a == 0 and b == len(seg.sids) and seg.nlive == len(seg.sids):
                ids = seg.sids
            else:
                ids = array("I", compress(seg.sids[a:b], seg.live[a:b]))
            if len(wanted) <= 4:
                n += sum(ids.count(sid) for sid in wanted)
            else:
                n += sum(1 for sid in ids if sid in wanted)
        return n

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

    def stored_bytes(self) -> int:
        """See ``StreamStore.stored_bytes``."""
        self._check_open()
        return self._bytes

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

    def msg_ids_since(self, ts_floor_ns: int) -> list[tuple[str, int, int]]:
        """See ``StreamStore.msg_ids_since``.

        Segments newest first, until one ends before the floor: each gives its
        ids from memory (the active one) or its checkpoint (sealed ones); a
        segment whose checkpoint lacks them (written before they were kept, or
        lost) has its live messages read instead.
        """
        self._check_open()
        out: list[tuple[str, int, int]] = []
        for seg in reversed(list(self._segs)):
            if not seg.nent:
                continue
            if seg.last_ts < ts_floor_ns:
                break
            if not seg.nlive or (seg.mids is None and seg.n_mids == 0):
                continue  # none kept: the arrays need not be loaded
            got = seg.disk_mids()
            if got is None:
                got = []
                j = seg.live.find(1)
                while j >= 0:
                    m = self._read(seg, j)
                    if m.headers:
                        mid = msg_id_of(m.headers)
                        if mid:
                            got.append((mid, m.seq, m.ts_ns))
                    j = seg.live.find(1, j + 1)
            found: dict[int, tuple[str, int, int]] = {}
            for e in got:  # a sequence re-used after a truncate: the later entry
                found[e[1]] = e
            base, live, n = seg.base, seg.live, len(seg.live)
            part = [
                e
                for q, e in sorted(found.items())
                if e[2] >= ts_floor_ns and 0 <= q - base < n and live[q - base]
            ]
            out[:0] = part
        return out

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
        stage_dir = self._dir / RESTORE_DIR
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
        marker = self._dir / RESTORE_MARKER
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
        self._settle_skip()
        self._active.sync()

    def flush_for_sync(self) -> int | None:
        """``sync`` without its fsync: every buffered record handed to the OS;
        returns a duplicate of the active segment's descriptor for the caller
        to fsync (from any thread: the descriptor is its own) and close, or
        None when nothing is open.  An fsync of it makes durable everything
        ``sync`` would have (earlier segments were synced when they sealed).
        """
        self._check_open()
        if self._pending_tombs:
            self._finish_op()
        self._settle_skip()
        self._active.flush()
        fd = self._active.fd
        return None if fd is None else os.dup(fd)

    def close(self) -> None:
        """See ``StreamStore.close``: sync, checkpoint changed segments, close fds."""
        if self._closed:
            return
        self._finish_op()
        self._settle_skip()
        self._active.trim()  # a closed store's files hold no preallocated zeros
        self._active.sync()
        for s in self._segs:
            s.wait_checkpoint()
            if s.idx_dirty and not s.damaged:
                s.checkpoint(self._subjects)
        self._close_files()
        self._closed = True


if TYPE_CHECKING:

    def _conforms(s: FileStreamStore) -> StreamStore:
        return s
