"""``ExpiringLog``: the layer between ``StreamLog`` and ``FileStreamStore`` that knows
which messages age out (``max_age``) or expire (``Nats-TTL``).

``max_age`` looks at the front of the log; ``Nats-TTL: never`` messages there are skipped,
found lazily by reading headers (the record is read for its timestamp anyway) and
remembered, and the first message that ages is cached as ``(seq, ts)`` while it stays live.
Positive per-message TTLs (``limits.msg_ttl``) are kept in a ``store.ttl.TtlIndex``: fed at
append, and rebuilt at every open (``_load``: open, truncate, restore) from each segment's
TTL facts (kept beside its index), reading the headers of live messages only where a
segment's checkpoint predates them -- only for streams that honour TTLs.
"""

from __future__ import annotations

from store.errors import StoreClosed
from store.file.checkpoint import load_checkpoint
from store.file.log import StreamLog
from store.limits import StreamLimits, expired, next_expiry
from store.ttl import NEVER, TtlIndex, msg_ttl_s

__all__ = ["ExpiringLog"]


class ExpiringLog(StreamLog):
    """Expiry on top of the segment files (see the module docstring); the base of
    ``store.file.store.FileStreamStore``, which sets the attributes declared here."""

    _limits: StreamLimits
    _ttls: TtlIndex
    _ageing: tuple[int, int] | None
    _closed: bool

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("store is closed")

    def _load(self, verify: bool | None = None) -> None:
        """Open the log (``StreamLog._load``), then rebuild the TTL index."""
        super()._load(verify)
        self._reindex_ttls()

    def _reindex_ttls(self) -> None:
        self._ttls.clear()
        self._ageing = None
        if not self._limits.msg_ttl:
            return
        # each segment's TTL facts (kept beside its index, like its msg ids),
        # not its messages; a segment whose checkpoint predates them is read
        active = self._active if self._segs else None
        for seg in list(self._segs):
            if not seg.nlive:
                continue
            facts = seg.ttls
            if facts is None and not seg.ttls_lost:
                facts = seg.disk_ttls_of(load_checkpoint(seg.idx_path))
            if facts is not None and not facts:
                continue  # none: the arrays need not be loaded
            if facts is None:
                j = seg.live.find(1)
                while j >= 0:
                    m = self._read(seg, j)
                    if m.headers:
                        self._ttls.note(m.seq, m.headers, m.ts_ns, honour_ttl=True)
                    j = seg.live.find(1, j + 1)
                continue
            base, live, n = seg.base, seg.live, len(seg.live)
            for seq, ts, ttl in facts:
                if 0 <= seq - base < n and live[seq - base]:
                    self._ttls.note_ttl(seq, ttl, ts, honour_ttl=True)
            if seg is not active and seg.sealed and not seg.idx_dirty and not seg.ttls_lost:
                seg.ttls = None  # on disk with its checkpoint

    def _live(self, seq: int) -> bool:
        loc = self._locate(seq)
        return loc is not None and bool(loc[0].live[loc[1]])

    def _ageing_from(self, seq: int) -> tuple[int, int] | None:
        """``(seq, ts)`` of the first live message at or after ``seq`` that
        ``max_age`` applies to (not ``Nats-TTL: never``)."""
        while seq:
            if not self._ttls.is_never(seq):
                m = self._read(*self._loc_or_fail(seq))
                if msg_ttl_s(m.headers) != NEVER:
                    return seq, m.ts_ns
                self._ttls.mark_never(seq)
            seq = self._next_live(seq + 1)
        return None

    def _first_ageing(self) -> tuple[int, int] | None:
        if not self._msgs:
            return None
        c = self._ageing
        if c is None or not self._live(c[0]):
            c = self._ageing = self._ageing_from(self._first)
        return c

    def next_expiry_ns(self) -> int | None:
        """See ``StreamStore.next_expiry_ns``."""
        self._check_open()
        if not self._msgs:
            return None
        due = None
        if self._limits.max_age_ns > 0:
            c = self._first_ageing()
            due = None if c is None else next_expiry(self._limits, c[1])
        ttl_due = self._ttls.next_deadline(self._live)
        if ttl_due is not None and (due is None or ttl_due < due):
            due = ttl_due
        return due

    def expiring(self, now_ns: int) -> list[int]:
        """See ``StreamStore.expiring``."""
        self._check_open()
        out: list[int] = []
        if self._limits.max_age_ns > 0:
            c = self._first_ageing()
            while c is not None and expired(self._limits, c[1], now_ns):
                out.append(c[0])
                nxt = self._next_live(c[0] + 1)
                c = self._ageing_from(nxt) if nxt else None
        due = self._ttls.peek_due(now_ns, self._live)
        if due:
            out = sorted(set(out).union(due))
        return out

    def expire(self, now_ns: int) -> int:
        """See ``StreamStore.expire``."""
        seqs = self.expiring(now_ns)
        for seq in seqs:
            self._kill_seq(seq)
        if seqs:
            self._finish_op()
        return len(seqs)
