"""Rebuilding a segment's index from its file at open.

Theory of operation
-------------------
For each segment, recovery first tries its index checkpoint: it is used only
if it names the same base, the same compression, and the size and CRC32 of
the segment bytes it covers match the file (``verify=True`` checks the CRC of
sealed segments too; the tail segment's CRC is always checked).  A sealed
segment's format-2 checkpoint is read only as far as its summary (``lazy``):
the arrays come from its body on first use (``Segment.make_lazy``), so an
open costs a small read per sealed segment, not a pass over its entries;
``COUNTS`` tallies what an open read (records scanned, index entries
decoded), for tests that bound it.  Bytes past
the checkpoint (the tail segment kept growing after the checkpoint was
written) are scanned record by record; a segment without a usable checkpoint
is scanned whole.

Scanning verifies every record's CRC (and every chunk's CRC for compressed
segments).  At a bad record it searches forward for the next valid record
(or chunk, by its magic).  If one is found the bad bytes are *interior
damage*: reported as a ``DamagedRange`` with the sequences that fell into it,
which become gaps (never served).  If none is found and this is the
uncompressed tail segment, the bytes are a *torn tail* (a write that never
completed), cut from the file.  Damage at the end of a sealed segment is
reported; its lost sequences run up to the next segment's base.

The tail segment's file may run past its last record with zeros (its size is
set ahead: ``Segment`` preallocation).  No record starts with zeros where its
kind byte is (a valid kind is non-zero), so zeros are never taken for a
record: a zero tail is the end of the log, cut at open like a torn tail but
not counted as torn bytes; a torn record followed by zeros is cut as a torn
record is (its bytes, up to the zeros, are the torn bytes).  The search for
the next valid record skips runs of zeros at C speed.
"""

from __future__ import annotations

import logging
import os
import re
import zlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress
from pathlib import Path
from typing import Any

import lz4.block

from store.api import DamagedRange
from store.file.checkpoint import (
    load_checkpoint,
    read_checkpoint_body,
    read_checkpoint_summary,
    read_file_crc,
)
from store.file.format import (
    CHUNK_HDR_SIZE,
    CHUNK_MAGIC,
    FLAG_COMPRESSED,
    KIND_ERASED,
    KIND_FLOOR,
    KIND_MSG,
    KIND_SEAL,
    KIND_TOMB,
    REC_HDR,
    REC_OVERHEAD,
    SEG_HDR_SIZE,
    check_record,
    decode_chunk_header,
    decode_seg_header,
)
from store.file.segment import Segment
from store.limits import Accounting, msg_size_raw
from store.msgids import id_bytes_and_ttl

__all__ = ["COUNTS", "PendingDamage", "SegmentScan", "open_segment"]

#: records scanned and index entries decoded since the process started (or a
#: test reset it): the work an open did, in steps rather than time
COUNTS: dict[str, int] = {"records": 0, "entries": 0}

Intern = Callable[[bytes], int]
"""subject bytes -> subject id (interning as needed)."""
InternMany = Callable[[list[str]], "array[int]"]
"""subjects -> their subject ids (interning as needed)."""
InternBulk = Callable[[list[bytes]], "array[int]"]
"""subjects as bytes -> their subject ids (interning as needed)."""

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PendingDamage:
    """A damaged region whose lost sequences are being determined."""

    file: str
    byte_start: int
    byte_end: int
    first_seq: int
    last_seq: int
    reason: str

    def freeze(self) -> DamagedRange:
        """As the public, immutable value."""
        last = self.last_seq if self.last_seq >= self.first_seq else 0
        first = self.first_seq if last else 0
        return DamagedRange(self.file, self.byte_start, self.byte_end, first, last, self.reason)


@dataclass(slots=True)
class SegmentScan:
    """What opening one segment produced."""

    seg: Segment
    damage: list[PendingDamage]
    torn_tail_bytes: int
    rebuilt: bool


def _apply_record(
    seg: Segment, buf: bytes | memoryview, pos: int, loff: int, total: int, intern: Intern
) -> PendingDamage | None:
    _t, kind, seq, ts, slen, hlen = REC_HDR.unpack_from(buf, pos)
    base_kind = kind & ~KIND_ERASED
    if base_kind == KIND_MSG:
        if seq < seg.next_seq:
            return PendingDamage(seg.name, loff, loff + total, 0, -1, "order")
        gap = seq - seg.next_seq
        if gap:
            add_gap(seg, gap, loff)
        o = pos + REC_HDR.size
        sid = intern(bytes(buf[o : o + slen]))
        plen = total - REC_OVERHEAD - slen - hlen
        size = msg_size_raw(slen, hlen, plen, Accounting.FILE)
        seg.add_entry(loff, size, sid, kind == KIND_MSG)
        seg.last_ts = ts
        if hlen and kind == KIND_MSG:
            hdrs = bytes(buf[o + slen : o + slen + hlen])
            mid, ttl = id_bytes_and_ttl(hdrs)
            if mid and seg.mids is not None:
                seg.mids.append((mid, seq, ts))
            if ttl and seg.ttls is not None:
                seg.ttls.append((seq, ts, ttl))
    elif kind == KIND_TOMB:
        o = pos + REC_HDR.size + slen + hlen
        seg.tombs.frombytes(bytes(buf[o : pos + total - 4]))
    elif kind == KIND_FLOOR:
        seg.floor = max(seg.floor, seq)
    elif kind == KIND_SEAL:
        seg.sealed = True
    seg.end = loff + total
    return None


def add_gap(seg: Segment, n: int, off: int) -> None:
    """Append ``n`` dead gap entries pointing at ``off``."""
    seg.offs.extend(array("I", [off]) * n)
    seg.sizes.extend(array("I", [0]) * n)
    seg.sids.extend(array("I", [0]) * n)
    seg.live.extend(bytes(n))


_NONZERO = re.compile(rb"[^\x00]")


def _next_valid_record(buf: bytes, start: int) -> int:
    """Offset of the next valid record at or after ``start``, or -1."""
    n = len(buf)
    kinds = (KIND_MSG, KIND_MSG | KIND_ERASED, KIND_TOMB, KIND_FLOOR, KIND_SEAL)
    q = start
    while q + REC_OVERHEAD <= n:
        if not buf[q + 4]:
            # a record's kind byte (at +4) is never zero: skip to the next
            # non-zero byte (a preallocated tail is zeros to the end)
            m = _NONZERO.search(buf, q + 5)
            if m is None:
                return -1
            q = m.start() - 4
            continue
        if buf[q + 4] in kinds:
            total = int.from_bytes(buf[q : q + 4], "little")
            if REC_OVERHEAD <= total <= n - q and check_record(buf, q):
                return q
        q += 1
    return -1


_CRC_RESIDUE = 0x2144DF1C  # zlib.crc32(m + zlib.crc32(m).to_bytes(4, "little")) for any m
_HDR_LESS_EXTRA = msg_size_raw(0, 0, 0, Accounting.FILE) - REC_OVERHEAD


def _scan_plain(
    seg: Segment, buf: bytes, pos: int, loff0: int, intern: Intern, bulk: InternBulk | None
) -> int:
    """The common run of ``_scan_records`` in one loop: consecutive valid
    MSG records without headers, at the segment's next sequence, indexed in
    bulk.  Returns where the run stopped (the first record it does not take:
    anything else goes the general way)."""
    n = len(buf)
    unpack = REC_HDR.unpack_from
    crc32 = zlib.crc32
    mv = memoryview(buf)
    hs = REC_HDR.size
    offs: list[int] = []
    sids: list[int] = []
    subjs: list[bytes] = []
    nxt = seg.next_seq
    last_subj = None
    sid = 0
    ts_last = 0
    start = pos
    while pos + REC_OVERHEAD <= n:
        total, kind, seq, ts, slen, hlen = unpack(buf, pos)
        if (
            kind != KIND_MSG
            or hlen
            or seq != nxt
            or total < REC_OVERHEAD + slen
            or pos + total > n
            or crc32(mv[pos : pos + total]) != _CRC_RESIDUE
        ):
            break
        subj = buf[pos + hs : pos + hs + slen]
        if bulk is not None:
            subjs.append(subj)
        elif subj != last_subj:
            sid = intern(subj)
            last_subj = subj
        offs.append(pos)
        sids.append(sid)
        ts_last = ts
        nxt += 1
        pos += total
    k = len(offs)
    if not k:
        return start
    # a headerless record's accounted size is its length plus a constant
    ends = [*offs[1:], pos]
    sizes = array("I", [b - a + _HDR_LESS_EXTRA for a, b in zip(offs, ends, strict=True)])
    o = array("I", [x + loff0 for x in offs] if loff0 else offs)
    seg.offs.extend(o)
    seg.sizes.extend(sizes)
    seg.sids.extend(bulk(subjs) if bulk is not None else array("I", sids))
    seg.live.extend(b"\x01" * k)
    seg.nlive += k
    seg.lbytes += sum(sizes)
    seg.last_ts = ts_last
    seg.end = loff0 + pos
    COUNTS["records"] += k
    return pos


def _scan_records(
    seg: Segment,
    buf: bytes,
    loff0: int,
    foff0: int,
    intern: Intern,
    damage: list[PendingDamage],
    bulk: InternBulk | None = None,
) -> int:
    """Scan records in ``buf`` (logical offset ``loff0``, file offset ``foff0``).

    Returns the offset in ``buf`` where valid data ends (``len(buf)`` if clean
    to the end).  Interior damage is appended to ``damage``.
    """
    pos = 0
    n = len(buf)
    open_dmg: PendingDamage | None = None
    while pos < n:
        if open_dmg is None:
            pos = _scan_plain(seg, buf, pos, loff0, intern, bulk)
            if pos >= n:
                break
        total = check_record(buf, pos)
        if total:
            COUNTS["records"] += 1
            if open_dmg is not None and (buf[pos + 4] & ~KIND_ERASED) == KIND_MSG:
                seq = int.from_bytes(buf[pos + 5 : pos + 13], "little")
                open_dmg.last_seq = seq - 1
                open_dmg = None
            bad = _apply_record(seg, buf, pos, loff0 + pos, total, intern)
            if bad is not None:
                bad.byte_start += foff0 - loff0
                bad.byte_end += foff0 - loff0
                damage.append(bad)
            pos += total
            continue
        q = _next_valid_record(buf, pos + 1)
        if q < 0:
            return pos
        d = PendingDamage(seg.name, foff0 + pos, foff0 + q, seg.next_seq, -1, "crc")
        damage.append(d)
        open_dmg = d
        pos = q
    return n


def _scan_chunks(
    seg: Segment,
    buf: bytes,
    intern: Intern,
    damage: list[PendingDamage],
    bulk: InternBulk | None = None,
) -> int:
    """Scan a compressed body (``buf`` = whole file).  Returns end of valid data."""
    pos = SEG_HDR_SIZE
    n = len(buf)
    open_dmg: PendingDamage | None = None
    while pos < n:
        hdr = decode_chunk_header(buf, pos)
        raw: bytes | None = None
        if hdr is not None:
            lstart, rlen, clen, dcrc = hdr
            comp = buf[pos + CHUNK_HDR_SIZE : pos + CHUNK_HDR_SIZE + clen]
            if len(comp) == clen and zlib.crc32(comp) == dcrc and lstart >= seg.end:
                try:
                    raw = lz4.block.decompress(comp, uncompressed_size=rlen)
                except Exception:  # lz4.block.LZ4BlockError
                    raw = None
        if raw is None or hdr is None:
            q = buf.find(CHUNK_MAGIC, pos + 1)
            while q >= 0 and decode_chunk_header(buf, q) is None:
                q = buf.find(CHUNK_MAGIC, q + 1)
            end = q if q >= 0 else n
            d = PendingDamage(seg.name, pos, end, seg.next_seq, -1, "chunk")
            damage.append(d)
            open_dmg = d
            if q < 0:
                return pos
            pos = q
            continue
        lstart, rlen, clen, _ = hdr
        seg.ch_lstart.append(lstart)
        seg.ch_foff.append(pos)
        seg.ch_rlen.append(rlen)
        seg.ch_clen.append(clen)
        if open_dmg is not None:
            first_msg = _first_msg_seq(raw)
            if first_msg:
                open_dmg.last_seq = first_msg - 1
                open_dmg = None
        inner: list[PendingDamage] = []
        end = _scan_records(seg, raw, lstart, pos, intern, inner, bulk)
        for d in inner:
            d.reason = "chunk-record"
        damage.extend(inner)
        if end < len(raw):
            damage.append(
                PendingDamage(
                    seg.name, pos, pos + CHUNK_HDR_SIZE + clen, seg.next_seq, -1, "chunk-record"
                )
            )
        seg.end = lstart + rlen
        pos += CHUNK_HDR_SIZE + clen
    return n


def _first_msg_seq(raw: bytes) -> int:
    pos = 0
    while pos + REC_OVERHEAD <= len(raw):
        total = check_record(raw, pos)
        if not total:
            return 0
        if (raw[pos + 4] & ~KIND_ERASED) == KIND_MSG:
            return int.from_bytes(raw[pos + 5 : pos + 13], "little")
        pos += total
    return 0


def _from_checkpoint(seg: Segment, ck: dict[str, Any], intern: Intern) -> None:
    mapping = {int(k): intern(v.encode()) for k, v in ck["subj"].items()}
    seg.offs.frombytes(ck["offs"])
    seg.sizes.frombytes(ck["sizes"])
    sids = array("I")
    sids.frombytes(ck["sids"])
    if any(k != v for k, v in mapping.items()):
        sids = array("I", map(mapping.__getitem__, sids))
    seg.sids = sids
    seg.live = bytearray(ck["live"])
    seg.sealed = bool(ck.get("sealed", False))
    seg.tombs.frombytes(ck["tombs"])
    seg.floor = int(ck["floor"])
    seg.end = int(ck["end"])
    seg.last_ts = int(ck["last_ts"])
    ch = ck["ch"]
    seg.ch_lstart.frombytes(ch[0])
    seg.ch_foff.frombytes(ch[1])
    seg.ch_rlen.frombytes(ch[2])
    seg.ch_clen.frombytes(ch[3])
    seg.stats = {mapping[int(k)]: [int(x) for x in v] for k, v in ck["stats"].items()}
    seg.mids = None  # on disk with the checkpoint (see ``Segment.disk_mids``)
    got = ck.get("mids")
    seg.n_mids = len(got) if isinstance(got, list) else None
    seg.ttls = Segment.disk_ttls_of(ck)  # handed to the store's TTL index at open
    seg.ttls_lost = seg.ttls is None
    seg.nlive = seg.live.count(1)
    n = len(seg.offs)
    COUNTS["entries"] += n
    if not (len(seg.sizes) == len(seg.sids) == len(seg.live) == n):
        raise ValueError("checkpoint arrays disagree")
    # C-level sums (a generator over zip cost ~0.12 s per million entries)
    seg.lbytes = sum(seg.sizes) if seg.nlive == n else sum(compress(seg.sizes, seg.live))


def _summary_into(seg: Segment, sm: dict[str, Any], intern_many: InternMany) -> array[int]:
    """Set ``seg``'s totals from a format-2 summary; returns the store's
    subject id of each of the checkpoint's local subjects."""
    names = sm["names"]
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
        raise ValueError("summary names")
    gmap = intern_many(names)
    cnt, first, last = array("Q"), array("Q"), array("Q")
    cnt.frombytes(sm["cnt"])
    first.frombytes(sm["first"])
    last.frombytes(sm["last"])
    if not (len(cnt) == len(first) == len(last) == len(gmap)):
        raise ValueError("summary arrays disagree")
    seg.cstats = (gmap, cnt, first, last)
    seg.sealed = bool(sm.get("sealed", False))
    seg.tombs.frombytes(sm["tombs"])
    seg.floor = int(sm["floor"])
    seg.end = int(sm["end"])
    seg.last_ts = int(sm["last_ts"])
    seg.nlive = int(sm["nlive"])
    seg.lbytes = int(sm["lbytes"])
    n_mids = sm.get("n_mids")
    seg.n_mids = int(n_mids) if n_mids is not None else None
    seg.mids = None  # on disk with the checkpoint (see ``Segment.disk_mids``)
    n_ttls = sm.get("n_ttls")
    seg.ttls = [] if n_ttls == 0 else None  # else read from the checkpoint when wanted
    seg.ttls_lost = n_ttls is None
    return gmap


def _body_into(seg: Segment, body: dict[str, Any], gmap: array[int], n: int) -> None:
    """Set ``seg``'s arrays from a format-2 body (local subject ids mapped)."""
    offs, sizes, lsids = array("I"), array("I"), array("I")
    offs.frombytes(body["offs"])
    sizes.frombytes(body["sizes"])
    lsids.frombytes(body["sids"])
    live = bytearray(body["live"])
    if not (len(offs) == len(sizes) == len(lsids) == len(live) == n):
        raise ValueError("checkpoint arrays disagree")
    if gmap != array("I", range(len(gmap))):
        lsids = array("I", map(gmap.__getitem__, lsids))
    ch = [array("Q"), array("Q"), array("I"), array("I")]
    for a, b in zip(ch, body["ch"], strict=True):
        a.frombytes(b)
    seg.offs, seg.sizes, seg.sids, seg.live = offs, sizes, lsids, live
    seg.ch_lstart, seg.ch_foff, seg.ch_rlen, seg.ch_clen = ch
    COUNTS["entries"] += n


def _lazy_loader(
    seg: Segment, body_off: int, gmap: array[int], n: int, on_bad: Callable[[Segment], None]
) -> Callable[[], None]:
    def load() -> None:
        body = read_checkpoint_body(seg.idx_path, body_off)
        try:
            if body is None:
                raise ValueError("checkpoint body unreadable")
            _body_into(seg, body, gmap, n)
        except (KeyError, TypeError, ValueError) as exc:
            log.error("event=segment_index_body_bad path=%s error=%r", seg.idx_path, exc)
            on_bad(seg)

    return load


def _checkpoint_usable(
    ck: dict[str, Any] | None,
    seg: Segment,
    size: int,
    is_last: bool,
    verify: bool,
    file_crc: Callable[[], int] | None = None,
) -> bool:
    if ck is None:
        return False
    try:
        if int(ck["base"]) != seg.base or bool(ck["compressed"]) != seg.compressed:
            return False
        ck_size = int(ck["file_size"])
        if ck_size > size or ((seg.compressed or not is_last) and ck_size != size):
            return False
        if verify or is_last:
            if file_crc is not None and ck_size == size:
                return file_crc() == int(ck["file_crc"])
            return read_file_crc(seg.path, ck_size) == int(ck["file_crc"])
        return True
    except (KeyError, TypeError, ValueError):
        return False


def open_segment(
    directory: Path,
    name: str,
    *,
    is_last: bool,
    intern: Intern,
    verify: bool,
    file_crc: Callable[[], int] | None = None,
    intern_many: InternMany | None = None,
    intern_bulk: InternBulk | None = None,
    on_bad: Callable[[Segment], None] | None = None,
) -> SegmentScan | None:
    """Open one segment: checkpoint if usable, scan the rest.

    ``file_crc``, if given, returns the CRC of the whole file (computed ahead,
    in parallel with the other segments' by the caller).  With ``on_bad``
    (and not ``verify``) a sealed segment with a format-2 checkpoint is
    opened lazily: its arrays are loaded on first use, and ``on_bad`` is
    called with the segment if the checkpoint's body then fails (the caller
    rebuilds it from the file).
    Returns ``None`` if the segment header itself is unreadable.
    """
    path = directory / name
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(SEG_HDR_SIZE)
    hdr = decode_seg_header(head)
    if hdr is None:
        return None
    seg = Segment(directory, hdr.base_seq, hdr.prev_last_ts, hdr.floor)
    seg.compressed = bool(hdr.flags & FLAG_COMPRESSED)
    got2 = read_checkpoint_summary(seg.idx_path)
    ck = load_checkpoint(seg.idx_path) if got2 is None else None  # format 1
    damage: list[PendingDamage] = []
    torn = 0
    used: dict[str, Any] | None = None
    scanned = False
    if got2 is not None and _checkpoint_usable(got2[0], seg, size, is_last, verify, file_crc):
        sm, body_off = got2
        try:
            n = int(sm["n"])
            gmap = _summary_into(
                seg, sm, intern_many or (lambda xs: array("I", [intern(x.encode()) for x in xs]))
            )
            if on_bad is not None and not is_last and not verify and seg.sealed:
                seg.make_lazy(n, _lazy_loader(seg, body_off, gmap, n, on_bad))
            else:
                body = read_checkpoint_body(seg.idx_path, body_off)
                if body is None:
                    raise ValueError("checkpoint body unreadable")
                _body_into(seg, body, gmap, n)
                seg.ttls = Segment.disk_ttls_of(body)
                seg.ttls_lost = seg.ttls is None
                if is_last:  # the active segment keeps its ids in memory
                    seg.mids = seg.raw_mids_of(body)
            used = sm
        except (KeyError, TypeError, ValueError):
            seg = Segment(directory, hdr.base_seq, hdr.prev_last_ts, hdr.floor)
            seg.compressed = bool(hdr.flags & FLAG_COMPRESSED)
    elif ck is not None and _checkpoint_usable(ck, seg, size, is_last, verify, file_crc):
        try:
            _from_checkpoint(seg, ck, intern)
            used = ck
            if is_last:  # the active segment keeps its ids in memory
                seg.mids = seg.raw_mids_of(ck)
        except (KeyError, TypeError, ValueError):
            seg = Segment(directory, hdr.base_seq, hdr.prev_last_ts, hdr.floor)
            seg.compressed = bool(hdr.flags & FLAG_COMPRESSED)
    if seg.compressed:
        if used is None:
            with open(path, "rb") as f:
                buf = f.read()
            _scan_chunks(seg, buf, intern, damage, intern_bulk)
            seg.file_crc = zlib.crc32(buf)
        else:
            seg.file_crc = int(used["file_crc"])
        seg.file_size = size
        seg.flushed = seg.end
    else:
        start = seg.end if used is not None else 0
        with open(path, "rb") as f:
            f.seek(SEG_HDR_SIZE + start)
            buf = f.read()
        valid = _scan_records(seg, buf, start, SEG_HDR_SIZE + start, intern, damage, intern_bulk)
        crc0 = int(used["file_crc"]) if used is not None else zlib.crc32(head)
        seg.file_crc = zlib.crc32(memoryview(buf)[:valid], crc0)
        if valid < len(buf):
            cut_at = SEG_HDR_SIZE + start + valid
            if is_last:
                # zeros past the last record are preallocated space, not torn
                torn = len(buf.rstrip(b"\0")) - valid if buf[-1] == 0 else len(buf) - valid
                torn = max(torn, 0)
                os.truncate(path, cut_at)
                size = cut_at
            else:
                damage.append(PendingDamage(name, cut_at, size, seg.next_seq, -1, "crc"))
                seg.file_crc = None
        seg.end = start + valid
        seg.flushed = seg.end
        seg.file_size = SEG_HDR_SIZE + seg.end if is_last else size
        seg.alloc = size
        if buf:
            seg.stats = None
            seg.cstats = None
            scanned = True
    seg.damaged = bool(damage)
    if seg.damaged:
        seg.stats = None
        seg.cstats = None
    # a format-1 checkpoint is rewritten as format 2 at the next checkpoint
    # or close, so the next open can leave the segment's arrays on disk
    seg.idx_dirty = used is None or scanned or got2 is None
    return SegmentScan(seg, damage, torn, used is None)
