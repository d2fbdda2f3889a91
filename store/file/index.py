"""``StreamIndex``: the in-memory index of a file stream store.

Theory of operation
-------------------
The index is everything :class:`~store.file.store.FileStreamStore` knows
without reading message bytes; it is rebuilt at every open and never written
as such (segment checkpoints, ``store.file.segment``, hold the per-segment
part).  It does no I/O: the log (``store.file.log``) feeds it and acts on
what it reports.

*Segments.*  ``_segs`` in base order, ``_bases`` their base sequences (for
``bisect``); the last one is the active segment.  Per segment, parallel
compact arrays indexed by ``seq - base``: record offset, size, subject id and
a ``live`` flag byte; ``nlive``/``lbytes`` count the live ones.  Finding the
next or previous live sequence is a C-speed ``bytearray.find``/``rfind``.

*Subjects.*  Each distinct subject gets an id, never reused until the index
is reset (``_subjects``, ``_sid_of``, ``_sid_of_b`` for the bytes form seen
by recovery).  Per subject id, ``array('q')`` count and ``array('Q')``
first / last (sequences are u64).  Counts are always exact.  After a deletion, first and last may be stale: a stale
first is a lower bound and a stale last an upper bound of the true value, and
both are recomputed lazily on demand (``_resolve_first``/``_resolve_last``,
scanning the segments' subject arrays with ``array.index``).

*Totals.*  ``_msgs``/``_bytes`` (live messages and their accounted size),
``_nsubj`` (subjects with a live message), ``_first`` (lowest live sequence,
0 if none), ``_first_ts`` (its timestamp, ``None`` until read), ``_last_seq``
and ``_last_ts``.  The state visible to callers is derived from these exactly
as in ``store.api``.

*Deletion.*  ``_kill`` is the one place a message stops being live: it
updates every counter above and queues the sequence in ``_pending_tombs``;
the log writes those as one TOMB record at the end of the operation.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Iterator
from itertools import compress

from store.api import Filters
from store.errors import InvariantViolation
from store.file.segment import Segment
from store.subjects import compile_filters, literal_filters

__all__ = ["StreamIndex"]


class StreamIndex:
    """Segments, per-subject state and totals of one stream, in memory.

    The base of :class:`~store.file.store.FileStreamStore`; see the module
    docstring.  Call :meth:`_reset_index` before use.
    """

    # ================================================================== state

    def _reset_index(self) -> None:
        """Forget everything: no segments, no subjects, every counter zero."""
        self._segs: list[Segment] = []
        self._bases: list[int] = []
        self._subjects: list[str] = []
        self._sid_of: dict[str, int] = {}
        self._sid_of_b: dict[bytes, int] = {}
        self._scount = array("q")
        self._sfirst = array("Q")
        self._slast = array("Q")
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

    def _intern_many(self, names: list[str]) -> array[int]:
        """The subject id of each of ``names``, interning new ones in bulk
        (C-level map and extends: a checkpoint summary of a KV-shaped segment
        holds tens of thousands)."""
        sid_of = self._sid_of
        got = list(map(sid_of.get, names))
        if None in got:
            new = list(dict.fromkeys([s for s, g in zip(names, got, strict=True) if g is None]))
            base = len(self._subjects)
            self._subjects.extend(new)
            sid_of.update(zip(new, range(base, base + len(new)), strict=True))
            zero = bytes(8 * len(new))
            self._scount.frombytes(zero)
            self._sfirst.frombytes(zero)
            self._slast.frombytes(zero)
            return array("I", map(sid_of.__getitem__, names))
        return array("I", got)  # type: ignore[arg-type]  # no None left

    def _intern_bulk(self, subjs: list[bytes]) -> array[int]:
        """``_intern_b`` of each of ``subjs`` (a tail scan's), new ones in bulk."""
        sid_of_b = self._sid_of_b
        got = list(map(sid_of_b.get, subjs))
        if None in got:
            new = list(dict.fromkeys([b for b, g in zip(subjs, got, strict=True) if g is None]))
            ids = self._intern_many([b.decode() for b in new])
            sid_of_b.update(zip(new, ids, strict=True))
            return array("I", map(sid_of_b.__getitem__, subjs))
        return array("I", got)  # type: ignore[arg-type]  # no None left

    def _add_seg(self, seg: Segment) -> None:
        self._segs.append(seg)
        self._bases.append(seg.base)

    # ================================================================== after recovery

    def _apply_deletions(self) -> None:
        floor = max([max(s.hdr_floor, s.floor) for s in self._segs] or [0])
        changed: set[int] = set()
        for k, seg in enumerate(self._segs):
            if seg.base < floor and seg.nlive:
                n = min(seg.nent, floor - seg.base)
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
                if i < s2.nent and s2.nlive and s2.live[i]:
                    s2.live[i] = 0
                    changed.add(k)
        for k in changed:
            seg = self._segs[k]
            seg.nlive = seg.live.count(1)
            seg.lbytes = sum(compress(seg.sizes, seg.live))
            seg.stats = None
            seg.cstats = None
            seg.idx_dirty = True

    def _derive_totals(self) -> None:
        last_seq = 0
        last_ts = 0
        for seg in self._segs:
            self._msgs += seg.nlive
            self._bytes += seg.lbytes
            nent = seg.nent
            if nent:
                if seg.last_msg_seq >= last_seq:
                    last_seq, last_ts = seg.last_msg_seq, seg.last_ts
            if seg.base - 1 >= last_seq and not nent:
                last_seq, last_ts = seg.base - 1, seg.prev_last_ts
            cst = seg.cstats
            seg.cstats = None
            rows: Iterable[tuple[int, int, int, int]]
            if cst is not None:  # a checkpoint summary's: no pass over entries
                rows = zip(*cst, strict=True)
            else:
                stats = seg.stats if seg.stats is not None else seg.compute_stats()
                rows = ((sid, c, f, last) for sid, (c, f, last) in stats.items())
            seg.stats = None
            scount, sfirst, slast = self._scount, self._sfirst, self._slast
            for sid, c, f, last in rows:
                if c <= 0:
                    continue
                if scount[sid] == 0:
                    sfirst[sid] = f
                    self._nsubj += 1
                scount[sid] += c
                slast[sid] = last
        self._last_seq = last_seq
        self._last_ts = last_ts
        self._first = self._next_live(0)

    # ================================================================== lookups

    @property
    def _active(self) -> Segment:
        return self._segs[-1]

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

    def _loc_or_fail(self, seq: int) -> tuple[Segment, int]:
        loc = self._locate(seq)
        if loc is None:
            raise InvariantViolation(f"seq {seq} not indexed")
        return loc

    # ================================================================== per-subject first/last

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

    # ================================================================== deletion

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

    # ================================================================== queries

    def _matching_sids(self, filters: Filters) -> list[int] | None:
        """Subject ids with live messages matching; ``None`` = everything.

        Literal filters are looked up (cost in the filters, not the subjects);
        wildcards match against every subject the stream has held.
        """
        if isinstance(filters, str) and filters in self._sid_of:  # one literal
            sid = self._sid_of[filters]
            return [sid] if self._scount[sid] else []
        lits = literal_filters(filters)
        if lits is not None:
            got = {self._sid_of.get(f, -1) for f in lits}
            return sorted(sid for sid in got if sid >= 0 and self._scount[sid])
        match = compile_filters(filters)
        if match is None:
            return None
        return [sid for sid, s in enumerate(self._subjects) if self._scount[sid] > 0 and match(s)]

    def _iter_matching(self, msids: set[int], start: int) -> Iterator[int]:
        """Live sequences >= start whose subject id is in ``msids``, in order."""
        k = max(0, bisect.bisect_right(self._bases, start) - 1)
        for seg in self._segs[k:]:
            if not seg.nlive:
                continue
            j0 = max(0, start - seg.base)
            sids, live, base = seg.sids, seg.live, seg.base
            if len(msids) <= 4:
                # a lazy merge of each subject's next position (C-level
                # ``index``): a caller that takes one (``load_next``) pays for
                # the distance to it, not for a walk of the whole segment
                nxt: dict[int, int] = {}
                for sid in msids:
                    try:
                        nxt[sid] = sids.index(sid, j0)
                    except ValueError:
                        pass
                while nxt:
                    sid = min(nxt, key=nxt.__getitem__) if len(nxt) > 1 else next(iter(nxt))
                    j = nxt[sid]
                    if live[j]:
                        yield base + j
                    try:
                        nxt[sid] = sids.index(sid, j + 1)
                    except ValueError:
                        del nxt[sid]
            else:
                for j in range(j0, len(sids)):
                    if live[j] and sids[j] in msids:
                        yield base + j

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
