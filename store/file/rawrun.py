"""A segment's consecutive live records read into a ``RawRun``.

``read_raw_run`` is ``Segment.read_run`` with another output: it walks the
same buffers (``Segment._run_buf``) and makes every check ``read_run`` makes
-- the record's length against its index entry and its buffer, its CRC, its
kind and sequence, raising the same ``CorruptionError`` -- but keeps each
record's subject as the stored bytes (no ``.decode()``), its header block
and payload as one slice (they are adjacent in the record, and adjacent in
an ``HMSG`` frame), and appends to the run's parallel lists instead of
building a ``StoredMsg``: a pull delivery's frames are then built from the
lists at once (``node.jetstream.pullframes.build_raw_frames``) without
turning subjects into strings and back.
"""

from __future__ import annotations

import zlib

from store.api import RawRun
from store.errors import CorruptionError
from store.file.format import KIND_MSG, REC_HDR, REC_OVERHEAD
from store.file.readcache import ReadCache
from store.file.segment import _CRC_RESIDUE, Segment

__all__ = ["read_raw_run"]


def read_raw_run(seg: Segment, i: int, want: int, cache: ReadCache, rr: RawRun) -> None:
    """Append to ``rr`` the live messages of ``seg``'s entries ``i``, ``i + 1``,
    ..., at most ``want`` of them (see ``Segment.read_run``).

    Raises:
        CorruptionError: a record fails its checksum or is not a message.
    """
    live = seg.live
    find = live.find
    i = find(1, i)
    if i < 0 or want <= 0:
        return
    offs = seg.offs
    sizes = seg.sizes
    nent = len(offs)
    base = seg.base
    name = seg.name
    unpack_hdr = REC_HDR.unpack_from
    crc32 = zlib.crc32
    add_seq, add_subj, add_ts = rr.seqs.append, rr.subjects.append, rr.ts.append
    add_hlen, add_body = rr.hlens.append, rr.bodies.append
    hsize = REC_HDR.size
    left = want
    while True:
        buf, bstart = seg._run_buf(i, left, cache)
        blen = len(buf)
        first = i  # the record this buffer was found for
        while True:
            dead = find(0, i)
            stop = nent if dead < 0 else dead
            if stop - i > left:
                stop = i + left
            start = i
            while i < stop:
                off = offs[i]
                pos = off - bstart
                if pos + REC_OVERHEAD > blen:
                    if i == first:
                        raise CorruptionError(name, off, base + i, "short")
                    break
                total, kind, rseq, ts, slen, hlen = unpack_hdr(buf, pos)
                end = pos + total - 4
                if total > sizes[i] + 1 or total < REC_OVERHEAD + slen + hlen:
                    raise CorruptionError(name, off, base + i, "crc")
                if end + 4 > blen:
                    if i == first:
                        raise CorruptionError(name, off, base + i, "crc")
                    break
                # the CRC of a record with its CRC appended is a constant
                if (
                    crc32(buf[pos : end + 4] if total < 4096 else memoryview(buf)[pos : end + 4])
                    != _CRC_RESIDUE
                ):
                    raise CorruptionError(name, off, base + i, "crc")
                if kind != KIND_MSG or rseq - i != base:
                    raise CorruptionError(name, off, base + i, "index")
                o = pos + hsize
                h = o + slen
                add_seq(rseq)
                add_subj(buf[o:h])
                add_ts(ts)
                add_hlen(hlen)
                add_body(buf[h:end])
                i += 1
            left -= i - start
            if i < stop:  # past this buffer: the next one
                break
            if not left or i >= nent:
                return
            i = find(1, i)
            if i < 0:
                return
