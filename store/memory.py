"""In-memory stream and consumer stores: the reference implementation.

Theory of operation
-------------------
``MemoryStreamStore`` keeps live messages in a dict ``seq -> StoredMsg``.
Appends are in increasing sequence order, so the dict's insertion order *is*
sequence order: the first live message is ``next(iter(msgs))``.  Per subject
it keeps an insertion-ordered dict of live sequences, giving count, first and
last in O(1) and removal in O(1).  Everything else of the state is derived
(see ``store.api``): ``first_seq`` is the smallest live sequence, else
``last_seq + 1`` (0 for a store that never held a sequence), and deleted
sequences are the gaps in ``[first_seq, last_seq]``.

Per-message TTLs and ``Nats-TTL: never`` are tracked by a ``store.ttl.TtlIndex``
fed at append and restore (the headers are at hand); removals need no hook
because the index asks which sequences are still live.

This store is deliberately simple: it is the model the file store is tested
against, and it backs ``storage: memory`` streams.  ``sync`` is a no-op; a
memory stream's durability is its replicas.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, BinaryIO

from store.api import (
    ConsumerState,
    ConsumerStore,
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
from store.errors import LimitExceeded, MsgNotFound, SequenceMismatch, StoreClosed, StoreEOF
from store.limits import (
    Accounting,
    StreamLimits,
    check_append,
    expired,
    msg_size,
    next_expiry,
    over_limits,
    over_subject_limit,
)
from store.msgids import msg_id_of
from store.snapshot import SnapshotHeader, iter_snapshot, read_header, write_snapshot
from store.subjects import compile_filters, is_match_all, literal_filters
from store.ttl import TtlIndex

__all__ = ["MemoryConsumerStore", "MemoryStreamStore"]


def _unbounded(limits: StreamLimits) -> bool:
    """No limit an append checks or enforces is set (size, count, bytes, per subject)."""
    return (
        limits.max_msg_size < 0
        and limits.max_msgs <= 0
        and limits.max_bytes <= 0
        and limits.max_msgs_per_subject <= 0
    )


class MemoryStreamStore:
    """A ``StreamStore`` held entirely in memory.

    Args:
        limits: Initial limits (normalised on the way in).
        accounting: Byte formula for the ``bytes`` stat; ``Accounting.MEMORY``
            matches nats-server's memory storage, ``Accounting.FILE`` lets the
            store act as a model of a file store.
    """

    raw_runs = False  # its RawRun is built from StoredMsgs: dearer than load_run

    def __init__(
        self,
        limits: StreamLimits | None = None,
        *,
        accounting: Accounting = Accounting.MEMORY,
    ) -> None:
        self._limits = (limits or StreamLimits()).normalised()
        self._unbounded = _unbounded(self._limits)
        self._acct = accounting
        self._msgs: dict[int, StoredMsg] = {}
        self._subj: dict[str, dict[int, None]] = {}
        self._bytes = 0
        self._last_seq = 0
        self._lo = 1  # no live sequence below it (see _first_seq)
        self._last_ts = 0
        self._closed = False
        self._report = RecoveryReport()
        self._ttls = TtlIndex()

    # ------------------------------------------------------------------ properties

    @property
    def sync_policy(self) -> SyncPolicy:
        """Always ``ALWAYS``; ``sync`` costs nothing."""
        return SyncPolicy.ALWAYS

    @property
    def sync_interval_s(self) -> float:
        """0: there is nothing to flush."""
        return 0.0

    @property
    def limits(self) -> StreamLimits:
        """Current (normalised) limits."""
        return self._limits

    @property
    def recovery_report(self) -> RecoveryReport:
        """Always clean."""
        return self._report

    # ------------------------------------------------------------------ helpers

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("store is closed")

    def _size(self, m: StoredMsg) -> int:
        return msg_size(m.subject, m.headers, m.payload, self._acct)

    def _first_seq(self) -> int:
        """The first live sequence: walked up from ``_lo``, a lower bound that
        only moves forward, so each sequence is passed over once (a plain
        ``next(iter(self._msgs))`` walks every slot deleted at the dict's front:
        a cost in the messages dropped, per call)."""
        msgs = self._msgs
        if not msgs:
            return self._last_seq + 1 if self._last_seq > 0 else 0
        lo = self._lo
        last = self._last_seq
        while lo not in msgs:
            lo += 1
            if lo > last:  # never: _lo is kept a lower bound; be safe anyway
                lo = min(msgs)
                break
        self._lo = lo
        return lo

    def _drop(self, seq: int) -> StoredMsg:
        m = self._msgs.pop(seq)
        self._bytes -= self._size(m)
        seqs = self._subj[m.subject]
        del seqs[seq]
        if not seqs:
            del self._subj[m.subject]
        return m

    def _iter_from(self, start: int) -> Iterator[StoredMsg]:
        if not self._msgs:
            return
        first = self._first_seq()
        lo = max(start, first)
        msgs = self._msgs
        if lo <= first:
            yield from msgs.values()
            return
        for s in range(lo, self._last_seq + 1):
            m = msgs.get(s)
            if m is not None:
                yield m

    # ------------------------------------------------------------------ writes

    def append_batch(
        self, msgs: Sequence[tuple[str, bytes, bytes, int]]
    ) -> tuple[int, LimitExceeded | None]:
        """See ``StreamStore.append_batch`` (one ``append`` per message: a
        memory store's append is already a dict insert)."""
        return append_each(self.append, msgs)

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
        size = msg_size(subject, headers, payload, self._acct)
        if self._unbounded and not headers:
            # The common case: no limit can reject or evict, no TTL to index.
            new_seq = self._last_seq + 1
            if not self._msgs:
                self._lo = new_seq
            self._msgs[new_seq] = StoredMsg(new_seq, subject, b"", bytes(payload), ts_ns)
            self._bytes += size
            sseqs = self._subj.get(subject)
            if sseqs is None:
                self._subj[subject] = {new_seq: None}
            else:
                sseqs[new_seq] = None
            self._last_seq = new_seq
            self._last_ts = ts_ns
            return new_seq, ts_ns
        sseqs = self._subj.get(subject)
        n_subj = len(sseqs) if sseqs else 0
        oldest: int | None = None
        if sseqs and self._limits.max_msgs_per_subject > 0:
            oldest = self._size(self._msgs[next(iter(sseqs))])
        err = check_append(
            self._limits,
            msgs=len(self._msgs),
            bytes_=self._bytes,
            hdr_len=len(headers),
            payload_len=len(payload),
            new_size=size,
            subject_msgs=n_subj,
            subject_oldest_size=oldest,
        )
        if err is not None:
            raise err()
        new_seq = self._last_seq + 1
        if not self._msgs:
            self._lo = new_seq
        self._msgs[new_seq] = StoredMsg(new_seq, subject, bytes(headers), bytes(payload), ts_ns)
        self._bytes += size
        if sseqs is None:
            sseqs = self._subj[subject] = {}
        sseqs[new_seq] = None
        self._last_seq = new_seq
        self._last_ts = ts_ns
        if headers:
            self._ttls.note(new_seq, headers, ts_ns, honour_ttl=self._limits.msg_ttl)
        self._enforce_subject(subject)
        self._enforce_stream()
        return new_seq, ts_ns

    def _enforce_subject(self, subject: str) -> int:
        n = 0
        sseqs = self._subj.get(subject)
        while sseqs and over_subject_limit(self._limits, len(sseqs)):
            self._drop(next(iter(sseqs)))
            n += 1
            sseqs = self._subj.get(subject)
        return n

    def _enforce_stream(self) -> int:
        n = 0
        while self._msgs and over_limits(self._limits, len(self._msgs), self._bytes):
            self._drop(self._first_seq())
            n += 1
        return n

    def remove(self, seq: int, *, erase: bool = False) -> None:
        """See ``StreamStore.remove``.  ``erase`` drops the only reference."""
        self._check_open()
        if seq > self._last_seq:
            raise StoreEOF("stream store EOF")
        if seq not in self._msgs:
            raise MsgNotFound("no message found")
        self._drop(seq)

    def purge(
        self, *, filter: str | None = None, seq: int | None = None, keep: int | None = None
    ) -> int:
        """See ``StreamStore.purge``."""
        self._check_open()
        seq = seq or 0
        keep = keep or 0
        if seq == 1:
            return 0
        if filter is None or is_match_all(filter):
            if keep == 0 and seq == 0:
                return self._purge_all(self._last_seq + 1)
            if seq > 1:
                return self.compact(seq)
            filter = ">"
        match = compile_filters(filter)
        matching = [m.seq for m in self._msgs.values() if match is None or match(m.subject)]
        if not matching:
            return 0
        maxp = 0
        if keep > 0:
            if keep >= len(matching):
                return 0
            maxp = len(matching) - keep
        last = seq - 1 if seq >= 1 else matching[-1]
        purged = 0
        for s in matching:
            if s > last:
                break
            self._drop(s)
            purged += 1
            if maxp and purged >= maxp:
                break
        return purged

    def _purge_all(self, first: int) -> int:
        n = len(self._msgs)
        self._msgs.clear()
        self._subj.clear()
        self._ttls.clear()
        self._bytes = 0
        self._last_seq = max(self._last_seq, first - 1)
        return n

    def compact(self, seq: int) -> int:
        """See ``StreamStore.compact``."""
        self._check_open()
        if seq <= 0:
            return self._purge_all(self._last_seq + 1)
        if seq > self._last_seq:
            return self._purge_all(seq)
        n = 0
        while self._msgs:
            first = self._first_seq()
            if first >= seq:
                break
            self._drop(first)
            n += 1
        return n

    def skip(self, seq: int) -> None:
        """See ``StreamStore.skip``."""
        self._check_open()
        if seq > self._last_seq:
            self._last_seq = seq

    def truncate(self, seq: int) -> None:
        """See ``StreamStore.truncate``."""
        self._check_open()
        if seq >= self._last_seq:
            return
        for s in [s for s in self._msgs if s > seq]:
            self._drop(s)
        self._ttls.forget_above(seq)
        self._last_seq = max(seq, 0)
        self._last_ts = 0
        if self._msgs:
            self._last_ts = self._msgs[next(reversed(self._msgs))].ts_ns

    def update_limits(self, limits: StreamLimits) -> int:
        """See ``StreamStore.update_limits``."""
        self._check_open()
        ttl_changed = limits.msg_ttl != self._limits.msg_ttl
        self._limits = limits.normalised()
        self._unbounded = _unbounded(self._limits)
        if ttl_changed:
            self._reindex_ttls()
        n = self._enforce_stream()
        if self._limits.max_msgs_per_subject > 0:
            for subj in [
                s for s, q in self._subj.items() if len(q) > self._limits.max_msgs_per_subject
            ]:
                n += self._enforce_subject(subj)
        return n

    def _reindex_ttls(self) -> None:
        self._ttls.clear()
        honour = self._limits.msg_ttl
        for m in self._msgs.values():
            if m.headers:
                self._ttls.note(m.seq, m.headers, m.ts_ns, honour_ttl=honour)

    def _live(self, seq: int) -> bool:
        return seq in self._msgs

    def _first_ageing(self) -> StoredMsg | None:
        """The oldest live message not marked ``Nats-TTL: never``."""
        for m in self._msgs.values():
            if not self._ttls.is_never(m.seq):
                return m
        return None

    def next_expiry_ns(self) -> int | None:
        """See ``StreamStore.next_expiry_ns``."""
        self._check_open()
        if not self._msgs:
            return None
        due = None
        if self._limits.max_age_ns > 0:
            m = self._first_ageing()
            due = None if m is None else next_expiry(self._limits, m.ts_ns)
        ttl_due = self._ttls.next_deadline(self._live)
        if ttl_due is not None and (due is None or ttl_due < due):
            due = ttl_due
        return due

    def expiring(self, now_ns: int) -> list[int]:
        """See ``StreamStore.expiring``."""
        self._check_open()
        out: list[int] = []
        if self._limits.max_age_ns > 0:
            for m in self._msgs.values():
                if not expired(self._limits, m.ts_ns, now_ns):
                    break
                if not self._ttls.is_never(m.seq):
                    out.append(m.seq)
        due = self._ttls.peek_due(now_ns, self._live)
        if due:
            out = sorted(set(out).union(due))
        return out

    def expire(self, now_ns: int) -> int:
        """See ``StreamStore.expire``."""
        seqs = self.expiring(now_ns)
        for seq in seqs:
            self._drop(seq)
        return len(seqs)

    # ------------------------------------------------------------------ reads

    def msg_ids_since(self, ts_floor_ns: int) -> list[tuple[str, int, int]]:
        """See ``StreamStore.msg_ids_since``: a walk back from the newest
        message (a memory store is never reopened, so this runs only when a
        state machine is built over a store that already holds messages)."""
        self._check_open()
        out: list[tuple[str, int, int]] = []
        for m in reversed(self._msgs.values()):
            if m.ts_ns < ts_floor_ns:
                break
            if m.headers:
                mid = msg_id_of(m.headers)
                if mid:
                    out.append((mid, m.seq, m.ts_ns))
        out.reverse()
        return out

    def load(self, seq: int) -> StoredMsg:
        """See ``StreamStore.load``."""
        self._check_open()
        m = self._msgs.get(seq)
        if m is None:
            if seq > self._last_seq:
                raise StoreEOF("stream store EOF")
            raise MsgNotFound("no message found")
        return m

    def load_raw_run(self, start_seq: int, max_msgs: int) -> RawRun:
        """See ``StreamStore.load_raw_run``."""
        return RawRun.of(self.load_run(start_seq, max_msgs))

    def load_run(self, start_seq: int, max_msgs: int) -> list[StoredMsg]:
        """See ``StreamStore.load_run``."""
        self._check_open()
        out: list[StoredMsg] = []
        if max_msgs > 0:
            append = out.append
            for m in self._iter_from(start_seq):
                append(m)
                if len(out) >= max_msgs:
                    break
        return out

    def load_next(self, filters: Filters, start_seq: int) -> StoredMsg | None:
        """See ``StreamStore.load_next``."""
        self._check_open()
        lits = literal_filters(filters)
        if lits is not None:
            best: int | None = None
            for lit in lits:
                for s in self._subj.get(lit, ()):
                    if s >= start_seq:
                        if best is None or s < best:
                            best = s
                        break
            return None if best is None else self._msgs[best]
        match = compile_filters(filters)
        for m in self._iter_from(start_seq):
            if match is None or match(m.subject):
                return m
        return None

    def load_next_run(self, filters: Filters, start_seq: int, max_msgs: int) -> list[StoredMsg]:
        """See ``StreamStore.load_next_run``: literal subjects few enough to
        walk are read from their own sequence lists, anything else by a
        forward walk from ``start_seq`` (what it skips, it skips once)."""
        self._check_open()
        out: list[StoredMsg] = []
        if max_msgs <= 0 or not self._msgs:
            return out
        lits = literal_filters(filters)
        if lits is not None:
            queues = [q for q in (self._subj.get(x) for x in set(lits)) if q]
            if sum(map(len, queues)) <= self._last_seq - start_seq + 1:
                seqs = sorted(s for q in queues for s in q if s >= start_seq)
                return [self._msgs[s] for s in seqs[:max_msgs]]
        match = compile_filters(filters)
        for m in self._iter_from(start_seq):
            if match is None or match(m.subject):
                out.append(m)
                if len(out) >= max_msgs:
                    break
        return out

    def count_in_range(self, filters: Filters, lo: int, hi: int) -> int:
        """See ``StreamStore.count_in_range``."""
        self._check_open()
        if lo > hi or not self._msgs:
            return 0
        lits = literal_filters(filters)
        if lits is not None:
            queues = [q for q in (self._subj.get(x) for x in set(lits)) if q]
            if sum(map(len, queues)) <= hi - lo + 1:
                return sum(1 for q in queues for s in q if lo <= s <= hi)
        match = compile_filters(filters)
        n = 0
        for m in self._iter_from(lo):
            if m.seq > hi:
                break
            if match is None or match(m.subject):
                n += 1
        return n

    def load_last(self, filters: Filters) -> StoredMsg:
        """See ``StreamStore.load_last``."""
        self._check_open()
        lits = literal_filters(filters)
        if lits is not None:
            last = [next(reversed(q)) for q in (self._subj.get(x) for x in lits) if q]
            if not last:
                raise MsgNotFound("no message found")
            return self._msgs[max(last)]
        match = compile_filters(filters)
        best = 0
        for subj, seqs in self._subj.items():
            if match is None or match(subj):
                best = max(best, next(reversed(seqs)))
        if best == 0:
            raise MsgNotFound("no message found")
        return self._msgs[best]

    def stored_bytes(self) -> int:
        """See ``StreamStore.stored_bytes``."""
        self._check_open()
        return self._bytes

    def state(
        self, *, deleted_details: bool = False, subjects_filter: str | None = None
    ) -> StreamState:
        """See ``StreamStore.state``."""
        self._check_open()
        first = self._first_seq()
        first_ts = self._msgs[first].ts_ns if self._msgs else 0
        n = len(self._msgs)
        num_deleted = max(0, self._last_seq - first + 1 - n) if n else 0
        deleted: tuple[int, ...] | None = None
        if deleted_details:
            deleted = tuple(
                s for s in range(first, self._last_seq + 1) if n and s not in self._msgs
            )
        subjects: dict[str, int] | None = None
        if subjects_filter is not None:
            subjects = {k: v.msgs for k, v in self.subject_state(subjects_filter).items()}
        return StreamState(
            msgs=n,
            bytes=self._bytes,
            first_seq=first,
            first_ts=first_ts,
            last_seq=self._last_seq,
            last_ts=self._last_ts,
            num_subjects=len(self._subj),
            num_deleted=num_deleted,
            deleted=deleted,
            subjects=subjects,
        )

    def subject_state(self, filter: str = ">") -> dict[str, SubjectState]:
        """See ``StreamStore.subject_state``."""
        self._check_open()
        match = compile_filters(filter)
        return {
            s: SubjectState(len(q), next(iter(q)), next(reversed(q)))
            for s, q in self._subj.items()
            if match is None or match(s)
        }

    # ------------------------------------------------------------------ snapshot

    def snapshot(self, out: BinaryIO) -> None:
        """See ``StreamStore.snapshot``."""
        self._check_open()
        hdr = SnapshotHeader(self._first_seq(), self._last_seq, self._last_ts, len(self._msgs))
        write_snapshot(out, hdr, list(self._msgs.values()))

    def restore(self, src: BinaryIO) -> None:
        """See ``StreamStore.restore``."""
        self._check_open()
        hdr = read_header(src)
        msgs = list(iter_snapshot(src, hdr))
        self._msgs = {}
        self._subj = {}
        self._bytes = 0
        for m in msgs:
            self._msgs[m.seq] = m
            self._subj.setdefault(m.subject, {})[m.seq] = None
            self._bytes += self._size(m)
        self._lo = min(self._msgs, default=1)
        self._last_seq = hdr.last_seq
        self._last_ts = hdr.last_ts
        self._reindex_ttls()

    def sync(self) -> None:
        """No-op (checks the store is open)."""
        self._check_open()

    def close(self) -> None:
        """Close; later calls raise ``StoreClosed``.  Idempotent."""
        self._closed = True

    def snapshot_bytes(self) -> bytes:
        """Convenience: the snapshot as bytes."""
        buf = io.BytesIO()
        self.snapshot(buf)
        return buf.getvalue()


class MemoryConsumerStore:
    """A ``ConsumerStore`` that keeps the state in memory only."""

    def __init__(self) -> None:
        self._state = ConsumerState()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("consumer store is closed")

    def load(self) -> ConsumerState:
        """See ``ConsumerStore.load``."""
        self._check_open()
        return self._state

    def save(self, state: ConsumerState) -> None:
        """See ``ConsumerStore.save``."""
        self._check_open()
        self._state = state

    def sync(self) -> None:
        """No-op."""
        self._check_open()

    def delete(self) -> None:
        """Forget the state and close."""
        self._state = ConsumerState()
        self._closed = True

    def close(self) -> None:
        """Close.  Idempotent."""
        self._closed = True


if TYPE_CHECKING:

    def _conforms(
        s: MemoryStreamStore, c: MemoryConsumerStore
    ) -> tuple[StreamStore, ConsumerStore]:
        return s, c
