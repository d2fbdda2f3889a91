"""One segment file and its compact in-memory index.

Theory of operation
-------------------
A ``Segment`` covers the contiguous sequences ``[base, base + len(offs))``.
Entry ``i`` (sequence ``base + i``) lives in four parallel compact arrays, not
in an object per message:

* ``offs`` (``array('I')``): logical offset of the record in the body.  A gap
  entry (a sequence with no record: lost to damage, or skipped) holds the
  offset of the next record, so ``offs`` is non-decreasing and bisectable.
* ``sizes`` (``array('I')``): accounted size (nats-server file formula); 0 for gaps.
* ``sids`` (``array('I')``): subject id (index into the store's subject table).
* ``live`` (``bytearray``): 1 while the message is live.

The active (last) segment appends into a write buffer that ``flush`` hands to
the OS and ``sync`` fsyncs; reads of buffered records are served from the
buffer, and reads of flushed records through the store's ``ReadCache``
(read-ahead windows; ``gen`` counts in-place changes of the file's bytes so
cached copies are never served stale).  ``read_run`` reads consecutive
live entries (a consumer's forward read), parsing every record that lies in
the buffer at hand in one loop, with the same checks as ``read_msg``.  A
sealed segment may be rewritten compressed (independent lz4 chunks) and then
is read chunk by chunk through the same cache's one-chunk entry.
``file_crc`` tracks the CRC of the bytes on disk so an index checkpoint can
prove it matches the file it describes.

*Preallocation.*  The active segment's file runs ahead of its logical end:
``flush`` sets the file's size (``posix_fallocate``) past what it writes
whenever a write would pass it -- by a quarter of what the segment holds, within
``PREALLOC_BYTES_MIN`` and ``PREALLOC_BYTES``, so a stream that holds little
keeps little allocated ahead (64 KiB, not 1 MiB, per idle stream) (``alloc``: the size set), so
most syncs overwrite space whose size is already on disk and ``sync`` is an
``fdatasync`` that commits no file-system metadata (a size change is what
costs: ~130 us against ~90 us per sync publish on ext4).  The bytes past the
logical end are zeros (never written, or cut and re-grown), which recovery
reads as the end of the log (``store.file.recovery``); ``trim`` cuts them
before a seal and at close, so sealed files -- their sizes and CRCs, the
checkpoints describing them, anything copying them -- are exactly as without
preallocation.  ``file_size`` is always the logical size (header + flushed
body).

*Lazy index.*  A sealed segment opened from its checkpoint (format 2, see
``store.file.format``) gets only the checkpoint's *summary* at open: entry
count, live count and bytes, tombstones, floor, per-subject count/first/last.
Its arrays (``LAZY_FIELDS``) are absent until first touched: ``__getattr__``
runs the loader recovery left in ``_body`` once, which reads and checks the
checkpoint's body and sets them.  ``nent``/``next_seq``/``last_msg_seq``
answer from the summary meanwhile.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import zlib
from array import array
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import lz4.block

from store.api import RawRun, StoredMsg
from store.errors import CorruptionError
from store.file.checkpoint import (
    SubjectStats,
    checkpoint_pool,
    encode_checkpoint,
    fsync_dir,
    load_checkpoint,
    read_file_crc,
    stats_of,
)
from store.file.format import (
    CHUNK_HDR_SIZE,
    FLAG_COMPRESSED,
    KIND_MSG,
    KIND_SEAL,
    REC_HDR,
    REC_OVERHEAD,
    SEG_HDR_SIZE,
    SEG_VERSION,
    SegHeader,
    decode_chunk_header,
    encode_chunk,
    encode_record,
    encode_seg_header,
    idx_name,
    seg_name,
)
from store.file.readcache import ReadCache

__all__ = ["LAZY_FIELDS", "Segment", "SubjectStats"]

#: a lazily opened segment's attributes that its checkpoint body provides
LAZY_FIELDS = frozenset(
    {"offs", "sizes", "sids", "live", "ch_lstart", "ch_foff", "ch_rlen", "ch_clen"}
)

WBUF_BYTES_MAX = 256 << 10
#: how far past a write the active segment's size is set: a quarter of the segment's
#: body, within these (see module docstring)
PREALLOC_BYTES_MIN = 64 << 10
PREALLOC_BYTES = 1 << 20
CHUNK_RAW_BYTES = 64 << 10
_U32 = struct.Struct("<I")
_CRC_RESIDUE = 0x2144DF1C  # zlib.crc32(m + zlib.crc32(m).to_bytes(4, "little")) for any m
_new_tuple = tuple.__new__  # builds a StoredMsg (a NamedTuple) without its Python __new__

CompactStats = tuple[array, array, array, array]  # type: ignore[type-arg]
"""Per-subject state from a checkpoint summary: parallel arrays of subject id
(the store's), count, first and last sequence (count 0: no live message)."""


log = logging.getLogger(__name__)


class Segment:
    """Index and I/O of one segment file (see module docstring)."""

    def __init__(self, directory: Path, base: int, prev_last_ts: int, hdr_floor: int) -> None:
        self.dir = directory
        self.base = base
        self.name = seg_name(base)
        self.path = directory / self.name
        self.idx_path = directory / idx_name(base)
        self.prev_last_ts = prev_last_ts
        self.hdr_floor = hdr_floor
        self.compressed = False
        self.offs = array("I")
        self.sizes = array("I")
        self.sids = array("I")
        self.live = bytearray()
        self.nlive = 0
        self.lbytes = 0
        self.tombs = array("Q")
        self.floor = 0
        self.end = 0
        self.last_ts = 0
        self.ch_lstart = array("Q")
        self.ch_foff = array("Q")
        self.ch_rlen = array("I")
        self.ch_clen = array("I")
        self.file_size = SEG_HDR_SIZE
        #: the file's size as set (>= ``file_size`` while preallocated ahead)
        self.alloc = SEG_HDR_SIZE
        self.file_crc: int | None = 0
        self.fd: int | None = None
        self.wbuf = bytearray()
        self.flushed = 0
        self.damaged = False
        self.sealed = False
        self.idx_dirty = True
        #: a checkpoint being written in the background (``checkpoint_later``)
        self._pending: Future[None] | None = None
        self.stats: SubjectStats | None = None
        self.gen = 0
        #: ``(msg id, seq, ts)`` of the messages carrying ``Nats-Msg-Id``, in
        #: append order (a sequence re-used after a truncate appears again,
        #: later); ``None`` once sealed: then they live in the checkpoint.
        self.mids: list[tuple[bytes, int, int]] | None = []
        #: how many ``mids`` the checkpoint holds while they are not in memory
        #: (``None``: unknown), so a segment without any is never read for them
        self.n_mids: int | None = 0
        #: ``(seq, ts, ttl seconds or NEVER)`` of the messages carrying a valid
        #: ``Nats-TTL``, kept like ``mids``; ``ttls_lost``: the checkpoint it
        #: was opened from predates them (read the messages instead).
        self.ttls: list[tuple[int, int, int]] | None = []
        self.ttls_lost = False
        #: a summary's per-subject state, merged into the store's at open
        self.cstats: CompactStats | None = None
        #: entries while the arrays are not loaded (``None``: loaded)
        self.lazy_n: int | None = None
        #: the loader of the arrays while they are not loaded
        self._body: Callable[[], None] | None = None

    def __getattr__(self, name: str) -> Any:
        # only reached when an attribute is missing: the arrays of a lazily
        # opened segment, loaded on first use
        body = self.__dict__.get("_body")
        if body is not None and name in LAZY_FIELDS:
            self._body = None
            body()
            self.lazy_n = None
            return self.__dict__[name]
        raise AttributeError(name)

    def make_lazy(self, n: int, loader: Callable[[], None]) -> None:
        """Drop the arrays; ``loader`` sets them (all of ``LAZY_FIELDS``) on
        first use.  ``n``: the entry count meanwhile."""
        for name in LAZY_FIELDS:
            self.__dict__.pop(name, None)
        self.lazy_n = n
        self._body = loader

    @property
    def loaded(self) -> bool:
        """Whether the arrays are in memory."""
        return self.lazy_n is None

    @property
    def nent(self) -> int:
        """Number of entries (sequences covered), loaded or not."""
        n = self.lazy_n
        return len(self.offs) if n is None else n

    # ------------------------------------------------------------------ basics

    @property
    def next_seq(self) -> int:
        """Sequence the next entry would get."""
        n = self.lazy_n
        return self.base + (len(self.offs) if n is None else n)

    @property
    def last_msg_seq(self) -> int:
        """Sequence of the last entry (``base - 1`` if none)."""
        return self.next_seq - 1

    def header(self) -> SegHeader:
        """The header this segment was created with."""
        flags = FLAG_COMPRESSED if self.compressed else 0
        return SegHeader(SEG_VERSION, flags, self.base, self.prev_last_ts, self.hdr_floor)

    def open_fd(self) -> int:
        """Open (read/write) the file if needed; returns the fd."""
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDWR)
        return self.fd

    def close_fd(self) -> None:
        """Close the fd if open."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    @classmethod
    def create(
        cls, directory: Path, base: int, prev_last_ts: int, floor: int, *, durable: bool = True
    ) -> Segment:
        """Create a new empty segment file (fsynced, directory fsynced)."""
        seg = cls(directory, base, prev_last_ts, floor)
        hdr = encode_seg_header(seg.header())
        fd = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, hdr)
        if durable:
            os.fsync(fd)
        seg.fd = fd
        seg.file_size = seg.alloc = len(hdr)
        seg.file_crc = zlib.crc32(hdr)
        if durable:
            fsync_dir(directory)
        return seg

    # ------------------------------------------------------------------ writes

    def write_record(self, rec: bytes) -> int:
        """Append a record to the body; returns its logical offset."""
        off = self.end
        self.wbuf += rec
        self.end += len(rec)
        if len(self.wbuf) >= WBUF_BYTES_MAX:
            try:
                self.flush()
            except OSError:
                # the record is taken (the caller indexes it next): a full disk
                # fails the owner's next sync instead, which is retried (a flush
                # writes the whole buffer again at the same offset)
                pass
        return off

    def add_entry(self, off: int, size: int, sid: int, live: bool) -> None:
        """Append an index entry for sequence ``next_seq``."""
        self.offs.append(off)
        self.sizes.append(size)
        self.sids.append(sid)
        self.live.append(1 if live else 0)
        if live:
            self.nlive += 1
            self.lbytes += size

    def flush(self) -> None:
        """Hand buffered records to the OS (no fsync)."""
        if not self.wbuf:
            return
        fd = self.open_fd()
        data = bytes(self.wbuf)
        pos = SEG_HDR_SIZE + self.flushed
        if pos + len(data) > self.alloc and not self.sealed:
            ahead = min(PREALLOC_BYTES, max(PREALLOC_BYTES_MIN, self.flushed // 4))
            self._grow(fd, pos + len(data) + ahead)
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, pos)
            view = view[n:]
            pos += n
        if self.file_crc is not None:
            self.file_crc = zlib.crc32(data, self.file_crc)
        self.flushed += len(data)
        self.file_size = SEG_HDR_SIZE + self.flushed
        if self.file_size > self.alloc:
            self.alloc = self.file_size
        # a new buffer, not the old one emptied: a reader in the trio thread
        # that took the old one (and the old ``flushed``) just before this
        # ran in the sync thread still finds its record there
        self.wbuf = bytearray()

    def _grow(self, fd: int, size: int) -> None:
        """Set the file's size to ``size`` (zeros past the logical end).  On
        failure (a full disk, a file system without it) the write extends
        the file as without preallocation."""
        try:
            os.posix_fallocate(fd, self.alloc, size - self.alloc)
        except OSError:
            self.alloc = max(os.fstat(fd).st_size, self.file_size)
            return
        self.alloc = size

    def sync(self) -> None:
        """Flush and ``fdatasync``: the data and the file's size (metadata a
        read needs) are made durable, not its times."""
        self.flush()
        if self.fd is not None:
            os.fdatasync(self.fd)

    def trim(self) -> None:
        """Cut the preallocated zeros past the logical end (flushed first);
        made durable by the caller's next sync."""
        self.flush()
        if self.alloc > self.file_size and not self.compressed:
            os.ftruncate(self.open_fd(), self.file_size)
            self.alloc = self.file_size

    def overwrite(self, off: int, data: bytes | bytearray) -> None:
        """Replace flushed body bytes at logical ``off`` in place, fsynced
        (erase); cached copies of this segment's bytes become stale."""
        fd = self.open_fd()
        view = memoryview(data)
        pos = SEG_HDR_SIZE + off
        while view:
            k = os.pwrite(fd, view, pos)
            view = view[k:]
            pos += k
        os.fsync(fd)
        self.gen += 1
        self.file_crc = None

    # ------------------------------------------------------------------ reads

    def _chunk_raw(self, ci: int, cache: ReadCache | None) -> bytes:
        raw = cache.get_chunk(self, ci) if cache is not None else None
        if raw is not None:
            return raw
        fd = self.open_fd()
        foff = self.ch_foff[ci]
        clen = self.ch_clen[ci]
        buf = os.pread(fd, CHUNK_HDR_SIZE + clen, foff)
        hdr = decode_chunk_header(buf, 0)
        comp = buf[CHUNK_HDR_SIZE:]
        if hdr is None or hdr[2] != clen or zlib.crc32(comp) != hdr[3]:
            raise CorruptionError(self.name, foff, 0, "chunk")
        try:
            raw = bytes(lz4.block.decompress(comp, uncompressed_size=self.ch_rlen[ci]))
        except Exception as e:  # lz4 raises LZ4BlockError
            raise CorruptionError(self.name, foff, 0, "decompress") from e
        if cache is not None:
            cache.put_chunk(self, ci, raw)
        return raw

    def read_msg(self, i: int, cache: ReadCache) -> StoredMsg:
        """Read and verify the message record of entry ``i``.

        The record is found in the write buffer, a decompressed chunk or a
        read-ahead window (``cache``) and parsed where it lies: no copy of the
        record is made before the fields are sliced out of it.

        Raises:
            CorruptionError: the record fails its checksum or is not a message.
        """
        off = self.offs[i]
        n = self.sizes[i] + 1  # >= the record's length (see msg_size_raw)
        buf: bytes
        if self.compressed:
            ci = bisect.bisect_right(self.ch_lstart, off) - 1
            buf = self._chunk_raw(ci, cache)
            pos = off - self.ch_lstart[ci]
        elif off >= self.flushed:
            # the buffer first, then the offset it starts at: ``flush`` (the
            # sync thread) moves ``flushed`` before it replaces the buffer
            wbuf = self.wbuf
            flushed = self.flushed
            if off >= flushed:
                lo = off - flushed
                buf = bytes(wbuf[lo : lo + n])
                pos = 0
            else:  # flushed meanwhile: it is in the file now
                buf, pos = cache.record(self, off, n)
        else:
            buf, pos = cache.record(self, off, n)
        seq = self.base + i
        if len(buf) - pos < REC_OVERHEAD:
            raise CorruptionError(self.name, off, seq, "short")
        total, kind, rseq, ts, slen, hlen = REC_HDR.unpack_from(buf, pos)
        end = pos + total - 4
        if total > n or end + 4 > len(buf) or total < REC_OVERHEAD + slen + hlen:
            raise CorruptionError(self.name, off, seq, "crc")
        # a small record's copy costs less than a memoryview; a big one's more
        crc = zlib.crc32(buf[pos:end] if total < 4096 else memoryview(buf)[pos:end])
        if crc != _U32.unpack_from(buf, end)[0]:
            raise CorruptionError(self.name, off, seq, "crc")
        if kind != KIND_MSG or rseq != seq:
            raise CorruptionError(self.name, off, seq, "index")
        o = pos + REC_HDR.size
        h = o + slen
        p = h + hlen
        return _new_tuple(StoredMsg, (seq, buf[o:h].decode(), buf[h:p], buf[p:end], ts))

    def read_run(
        self, i: int, want: int, cache: ReadCache, out: list[StoredMsg], rr: RawRun | None = None
    ) -> None:
        """Append to ``out`` the live messages of entries ``i``, ``i + 1``, ...
        of this segment, at most ``want`` of them -- or, given ``rr``, to
        ``rr``'s lists instead (a ``RawRun``: the subject as the stored bytes,
        no ``.decode()``; the header block and payload as one slice, adjacent
        in the record as in an ``HMSG`` frame; no ``StoredMsg`` per message).

        The records are parsed in one loop from one buffer after another
        (``_run_buf``: a read-ahead window, a decompressed chunk, or one copy
        of a span of the write buffer), each record checked exactly as
        ``read_msg`` checks one.  A record that does not lie wholly in the
        current buffer is looked up afresh; only if it does not lie wholly in
        the buffer found for it either is it damaged (as in ``read_msg``).

        Raises:
            CorruptionError: a record fails its checksum or is not a message.
        """
        live = self.live
        find = live.find
        i = find(1, i)
        if i < 0 or want <= 0:
            return
        offs = self.offs
        sizes = self.sizes
        nent = len(offs)
        base = self.base
        unpack_hdr = REC_HDR.unpack_from
        crc32 = zlib.crc32
        append = out.append
        new = _new_tuple
        raw = rr is not None
        if rr is not None:
            add_seq, add_subj, add_ts = rr.seqs.append, rr.subjects.append, rr.ts.append
            add_hlen, add_body = rr.hlens.append, rr.bodies.append
        hsize = REC_HDR.size
        left = want
        while True:
            buf, bstart = self._run_buf(i, left, cache)
            blen = len(buf)
            first = i  # the record this buffer was found for
            # the live entries from ``i`` on, up to the first dead one (found
            # once per stretch, not tested per entry), at most ``left``
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
                            raise CorruptionError(self.name, off, base + i, "short")
                        break
                    total, kind, rseq, ts, slen, hlen = unpack_hdr(buf, pos)
                    end = pos + total - 4
                    if total > sizes[i] + 1 or total < REC_OVERHEAD + slen + hlen:
                        raise CorruptionError(self.name, off, base + i, "crc")
                    if end + 4 > blen:
                        if i == first:
                            raise CorruptionError(self.name, off, base + i, "crc")
                        break
                    # the CRC of a record with its (little-endian) CRC appended
                    # is a constant: the same test as comparing the two
                    if (
                        crc32(
                            buf[pos : end + 4] if total < 4096 else memoryview(buf)[pos : end + 4]
                        )
                        != _CRC_RESIDUE
                    ):
                        raise CorruptionError(self.name, off, base + i, "crc")
                    if kind != KIND_MSG or rseq - i != base:
                        raise CorruptionError(self.name, off, base + i, "index")
                    o = pos + hsize
                    h = o + slen
                    if raw:
                        add_seq(rseq)
                        add_subj(buf[o:h])
                        add_ts(ts)
                        add_hlen(hlen)
                        add_body(buf[h:end])
                    else:
                        p = h + hlen
                        append(new(StoredMsg, (rseq, buf[o:h].decode(), buf[h:p], buf[p:end], ts)))
                    i += 1
                left -= i - start
                if i < stop:  # past this buffer: the next one
                    break
                if not left or i >= nent:
                    return
                i = find(1, i)
                if i < 0:
                    return

    def _run_buf(self, i: int, want: int, cache: ReadCache) -> tuple[bytes, int]:
        """``(buf, start)``: a buffer holding the record of entry ``i`` (and
        maybe those after it) and the logical offset of ``buf[0]``.  From the
        write buffer, the span copied covers at most the ``want`` entries
        from ``i`` (by their size bounds)."""
        off = self.offs[i]
        if self.compressed:
            ci = bisect.bisect_right(self.ch_lstart, off) - 1
            return self._chunk_raw(ci, cache), self.ch_lstart[ci]
        if off >= self.flushed:
            # the buffer first, then the offset it starts at (see read_msg)
            wbuf = self.wbuf
            flushed = self.flushed
            if off >= flushed:
                j = min(i + want, len(self.offs)) - 1
                hi = self.offs[j] + self.sizes[j] + 1 - flushed
                return bytes(wbuf[off - flushed : hi]), off
        buf, pos = cache.record(self, off, self.sizes[i] + 1)
        return buf, off - pos

    def read_ts(self, i: int, cache: ReadCache) -> int:
        """Timestamp of entry ``i`` (verified)."""
        return self.read_msg(i, cache).ts_ns

    def body(self) -> bytes:
        """The whole logical body (decompressing if needed)."""
        if self.compressed:
            parts = [self._chunk_raw(ci, None) for ci in range(len(self.ch_lstart))]
            return b"".join(parts)
        self.flush()
        return os.pread(self.open_fd(), self.end, SEG_HDR_SIZE)

    # ------------------------------------------------------------------ sealing

    def seal(self) -> None:
        """Append the SEAL record (once), cut the preallocated tail and fsync:
        a sealed file holds exactly its header and records."""
        if not self.sealed:
            self.write_record(encode_record(KIND_SEAL, self.last_msg_seq, 0, b"", b"", b""))
            self.sealed = True
        self.trim()
        self.flush()
        if self.fd is not None:
            os.fsync(self.fd)

    def compress_file(self) -> None:
        """Rewrite this (sealed, flushed) segment as lz4 chunks, atomically."""
        body = self.body()
        out = bytearray(encode_seg_header(self._hdr_with(FLAG_COMPRESSED)))
        lstart = array("Q")
        foff = array("Q")
        rlen = array("I")
        clen = array("I")
        pos = 0
        while pos < len(body):
            j = bisect.bisect_left(self.offs, pos + CHUNK_RAW_BYTES)
            cut = self.offs[j] if j < len(self.offs) else len(body)
            if cut <= pos:
                cut = len(body)
            raw = body[pos:cut]
            comp = lz4.block.compress(raw, store_size=False)
            lstart.append(pos)
            foff.append(len(out))
            rlen.append(len(raw))
            clen.append(len(comp))
            out += encode_chunk(pos, raw, comp)
            pos = cut
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, out)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.close_fd()
        os.replace(tmp, self.path)
        fsync_dir(self.dir)
        self.gen += 1
        self.compressed = True
        self.ch_lstart, self.ch_foff, self.ch_rlen, self.ch_clen = lstart, foff, rlen, clen
        self.file_size = self.alloc = len(out)
        self.file_crc = zlib.crc32(out)
        self.idx_dirty = True

    def _hdr_with(self, flags: int) -> SegHeader:
        return SegHeader(SEG_VERSION, flags, self.base, self.prev_last_ts, self.hdr_floor)

    def rewrite_uncompressed(self, body: bytes) -> None:
        """Atomically replace the file with an uncompressed ``body``."""
        out = encode_seg_header(self._hdr_with(0)) + body
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, out)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.close_fd()
        os.replace(tmp, self.path)
        fsync_dir(self.dir)
        self.gen += 1
        self.compressed = False
        self.ch_lstart, self.ch_foff = array("Q"), array("Q")
        self.ch_rlen, self.ch_clen = array("I"), array("I")
        self.end = len(body)
        self.flushed = len(body)
        self.wbuf.clear()
        self.file_size = self.alloc = len(out)
        self.file_crc = zlib.crc32(out)
        self.idx_dirty = True

    # ------------------------------------------------------------------ stats

    def compute_stats(self) -> SubjectStats:
        """Per-subject [count, first, last] over live entries (C-speed where possible)."""
        return stats_of(self.sids, self.live, self.nlive, self.base)

    # ------------------------------------------------------------------ checkpoint

    def checkpoint(self, subjects: list[str]) -> None:
        """Write ``seg-<base>.idx`` describing the current file and index.

        Not fsynced: a lost or torn checkpoint fails its CRC and the segment
        is rescanned.  Damaged segments are never checkpointed, so their
        damage is found (and reported) again at every open.
        """
        self.wait_checkpoint()
        job = self._checkpoint_job(subjects)
        if job is not None:
            job()

    def checkpoint_later(self, subjects: list[str]) -> None:
        """``checkpoint`` with the work done in a background thread.

        The segment's index is copied here (C-speed copies); the per-subject
        statistics, the encoding and the write -- a second or more for a
        segment of tens of thousands of distinct subjects, the KV shape --
        happen in the checkpoint thread, which releases the GIL between
        slices (``CBOR_SLICE``), so the caller's event loop keeps running.
        Whatever reads or replaces the checkpoint file first waits for it
        (``wait_checkpoint``).
        """
        self.wait_checkpoint()
        job = self._checkpoint_job(subjects)
        if job is not None:
            self._pending = checkpoint_pool().submit(job)

    def wait_checkpoint(self) -> None:
        """Wait for a background checkpoint of this segment (if any).  A
        failed one is logged: the segment is rescanned at the next open."""
        f, self._pending = self._pending, None
        if f is None:
            return
        try:
            f.result()
        except OSError as exc:
            log.warning("event=segment_checkpoint_failed path=%s error=%r", self.idx_path, exc)

    def _checkpoint_job(self, subjects: list[str]) -> Callable[[], None] | None:
        """The checkpoint of the segment as it is now, as a call that touches
        nothing of the segment (copies only; safe in another thread)."""
        if self.damaged:
            return None
        self.flush()
        if self.file_crc is None:
            self.file_crc = read_file_crc(self.path, self.file_size)
        sids = array("I", self.sids)
        live = bytes(self.live)
        nlive, base = self.nlive, self.base
        names = list(subjects)
        mids = self._mids_for_checkpoint()
        ttls = self._ttls_for_checkpoint()
        summary: dict[str, Any] = {
            "base": self.base,
            "file_size": self.file_size,
            "file_crc": self.file_crc,
            "compressed": self.compressed,
            "end": self.end,
            "last_ts": self.last_ts,
            "floor": self.floor,
            "sealed": self.sealed,
            "n": len(sids),
            "nlive": nlive,
            "lbytes": self.lbytes,
            "tombs": self.tombs.tobytes(),
            "n_mids": len(mids) if mids is not None else None,
            "n_ttls": len(ttls) if ttls is not None else None,
        }
        body: dict[str, Any] = {
            "offs": self.offs.tobytes(),
            "sizes": self.sizes.tobytes(),
            "live": live,
            "ch": [a.tobytes() for a in (self.ch_lstart, self.ch_foff, self.ch_rlen, self.ch_clen)],
            "mids": mids,
            "ttls": ttls,
        }
        idx_path = self.idx_path
        self.idx_dirty = False

        def job() -> None:
            data = encode_checkpoint(summary, body, sids, live, nlive, base, names)
            tmp = idx_path.with_suffix(".idx.tmp")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, idx_path)

        return job

    def _mids_for_checkpoint(self) -> list[Any] | None:
        """The msg ids to write: those in memory, else the current
        checkpoint's (a sealed segment), else ``None`` (unknown: a reader
        scans the segment's messages instead)."""
        if self.mids is not None:
            return list(self.mids)  # (id, seq, ts) tuples: CBOR arrays, as lists
        if self.n_mids == 0:
            return []
        self.wait_checkpoint()
        ck = load_checkpoint(self.idx_path)
        got = ck.get("mids") if ck is not None else None
        return got if isinstance(got, list) else None

    def _ttls_for_checkpoint(self) -> list[list[int]] | None:
        if self.ttls is not None:
            return [list(e) for e in self.ttls]
        if self.ttls_lost:
            return None
        self.wait_checkpoint()
        ck = load_checkpoint(self.idx_path)
        got = ck.get("ttls") if ck is not None else None
        return got if isinstance(got, list) else None

    @staticmethod
    def disk_ttls_of(ck: dict[str, Any] | None) -> list[tuple[int, int, int]] | None:
        """The TTL facts a checkpoint holds (``None``: it holds none)."""
        got = ck.get("ttls") if ck is not None else None
        if not isinstance(got, list):
            return None
        try:
            return [(int(q), int(t), int(ttl)) for q, t, ttl in got]
        except (TypeError, ValueError):
            return None

    def disk_mids(self) -> list[tuple[str, int, int]] | None:
        """The msg ids of this segment: in memory, else read from its
        checkpoint; ``None`` when the checkpoint is missing or predates them."""
        if self.mids is not None:
            return [(m.decode("utf-8", "surrogateescape"), q, t) for m, q, t in self.mids]
        if self.n_mids == 0:
            return []
        self.wait_checkpoint()
        return self.disk_mids_of(load_checkpoint(self.idx_path))

    @staticmethod
    def disk_mids_of(ck: dict[str, Any] | None) -> list[tuple[str, int, int]] | None:
        """The msg ids a checkpoint holds (``None``: it holds none)."""
        raw = Segment.raw_mids_of(ck)
        if raw is None:
            return None
        return [(m.decode("utf-8", "surrogateescape"), q, t) for m, q, t in raw]

    @staticmethod
    def raw_mids_of(ck: dict[str, Any] | None) -> list[tuple[bytes, int, int]] | None:
        """``disk_mids_of`` with the ids as bytes (``Segment.mids``' form)."""
        got = ck.get("mids") if ck is not None else None
        if not isinstance(got, list):
            return None
        try:
            return [(bytes(m), int(q), int(t)) for m, q, t in got]
        except (TypeError, ValueError):
            return None

    def drop_checkpoint(self) -> None:
        """Remove a checkpoint that no longer matches the file."""
        self.wait_checkpoint()
        self.idx_dirty = True
        try:
            self.idx_path.unlink()
        except FileNotFoundError:
            pass
