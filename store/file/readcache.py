"""``ReadCache``: bounded caches of segment bytes for reads.

Theory of operation
-------------------
Reading a message costs one ``pread`` of its record unless the bytes are
already here.  Two kinds of entry, both bounded per store:

* *Chunk*: the last decompressed lz4 chunk of a compressed segment (one).
* *Windows*: read-ahead of an uncompressed segment's flushed body, for
  readers walking forward (a consumer loads ``seq``, ``seq + 1``, ...).  A read
  that hits no window is served by a ``pread`` of just its record, as
  before, and remembered as a *probe* (the last ``WINDOWS`` are kept); a
  later miss shortly past a probe (or at, or shortly past, a window's end)
  means the reader walks forward, so a window is read from there: ``WINDOW_BYTES_MIN`` at first, doubling on
  each refill up to ``WINDOW_BYTES_MAX``.  Random reads so cost one small
  ``pread`` each, as without the cache, and never evict windows; at most
  ``WINDOWS`` forward readers are followed at once (a further one replaces
  the window filled longest ago, starting small again).

Entries are immutable and published by one attribute assignment (the chunk
entry, the window list and the probe tuple are replaced, never changed in
place), so a reader in another thread (``select_start`` runs in one) never
sees a half-made entry; at worst an entry is lost.

Nothing is ever served from stale bytes: every entry remembers the segment
object and its ``gen``, which the segment bumps whenever bytes it already
holds on disk change (erase overwrites a record, a rewrite compresses or
truncates the file); an entry whose segment or ``gen`` differs is a miss.
Windows never cover the unflushed write buffer (reads of it are served by the
segment from the buffer), and appends only add bytes past a window's end.
The log also clears the cache when segments are removed or the store is
reset or closed, so dead segments' bytes are not kept.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from store.file.format import SEG_HDR_SIZE

if TYPE_CHECKING:
    from store.file.segment import Segment

__all__ = ["WINDOWS", "WINDOW_BYTES_MAX", "WINDOW_BYTES_MIN", "ReadCache"]

WINDOWS = 2
WINDOW_BYTES_MIN = 16 << 10
WINDOW_BYTES_MAX = 64 << 10


class _Window:
    """Bytes ``[start, start + len(data))`` of a segment body."""

    __slots__ = ("data", "gen", "seg", "size", "start", "tail")

    def __init__(self, seg: Segment, start: int, data: bytes, size: int, tail: bool) -> None:
        self.seg = seg
        self.gen = seg.gen
        self.start = start
        self.data = data
        self.size = size  # the read size asked for (len(data) may be less)
        self.tail = tail  # data runs to the end of the flushed body at read time


class ReadCache:
    """The chunk and window caches of one store (see module docstring)."""

    __slots__ = ("chunk", "probes", "wins")

    def __init__(self) -> None:
        self.chunk: tuple[Segment, int, int, bytes] | None = None  # seg, gen, ci, raw
        self.wins: list[_Window] = []
        self.probes: tuple[tuple[Segment, int, int, int], ...] = ()  # seg, gen, start, end

    def clear(self) -> None:
        """Forget everything."""
        self.chunk = None
        self.wins = []
        self.probes = ()

    @property
    def nbytes(self) -> int:
        """Bytes held (for tests and diagnostics)."""
        n = len(self.chunk[3]) if self.chunk is not None else 0
        return n + sum(len(w.data) for w in self.wins)

    # ------------------------------------------------------------------ chunks

    def get_chunk(self, seg: Segment, ci: int) -> bytes | None:
        """The cached raw bytes of chunk ``ci`` of ``seg``, if current."""
        c = self.chunk
        if c is not None and c[0] is seg and c[1] == seg.gen and c[2] == ci:
            return c[3]
        return None

    def put_chunk(self, seg: Segment, ci: int, raw: bytes) -> None:
        """Remember ``raw`` as chunk ``ci`` of ``seg`` (replacing the last one)."""
        self.chunk = (seg, seg.gen, ci, raw)

    # ------------------------------------------------------------------ windows

    def record(self, seg: Segment, off: int, n: int) -> tuple[bytes, int]:
        """``(buf, pos)``: the flushed record at logical ``off`` of ``seg`` is
        ``buf[pos:]`` (at most ``n`` bytes of it are needed).  ``off`` must be
        below ``seg.flushed``."""
        gen = seg.gen
        grow: _Window | None = None
        for w in self.wins:
            if w.seg is seg and w.gen == gen:
                lo = off - w.start
                if lo >= 0:
                    dn = len(w.data)
                    if lo + n <= dn or (w.tail and lo < dn):
                        return w.data, lo
                    if lo <= dn + w.size:
                        grow = w
        if grow is None:
            probes = self.probes
            for p in probes:
                if p[0] is seg and p[1] == gen and p[2] < off <= p[3] + WINDOW_BYTES_MIN:
                    self.probes = tuple(q for q in probes if q is not p)
                    break
            else:  # a random read (so far): no read-ahead
                data = _pread(seg, off, n)
                keep = probes[len(probes) + 1 - WINDOWS :]
                self.probes = (*keep, (seg, gen, off, off + len(data)))
                return data, 0
        return self._fill(seg, off, n, grow), 0

    def _fill(self, seg: Segment, off: int, n: int, grow: _Window | None) -> bytes:
        """Read a window at ``off``: a new one, or the next one of ``grow``."""
        size = WINDOW_BYTES_MIN if grow is None else min(grow.size * 2, WINDOW_BYTES_MAX)
        want = min(max(size, n), seg.flushed - off)
        data = _pread(seg, off, want)
        w = _Window(seg, off, data, size, off + want >= seg.flushed)
        wins = self.wins
        if grow is not None:
            wins = [x for x in wins if x is not grow]
        self.wins = [*wins[len(wins) + 1 - WINDOWS :], w]
        return data


def _pread(seg: Segment, off: int, n: int) -> bytes:
    fd = seg.fd
    if fd is None:
        fd = seg.open_fd()
    return os.pread(fd, n, SEG_HDR_SIZE + off)
