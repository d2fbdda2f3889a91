"""Portable stream snapshot format (used by every store's snapshot/restore).

Theory of operation
-------------------
A snapshot is a byte stream any store can restore, so a Raft follower with a
file store can install a snapshot taken from a memory store and vice versa::

    magic  b"TJSNAP\\x00\\x01"                       8 bytes
    header u32 length, CBOR map, u32 crc32           {first_seq,last_seq,last_ts,msgs}
    record u32 body length, body, u32 crc32          body = u64 seq, i64 ts,
           (repeated ``msgs`` times)                 u16 slen, u32 hlen, subj, hdr, payload
    trailer b"TJEND\\x00\\x00\\x00", u64 count, u32 crc32 of every record crc

Only live messages are written; deleted sequences are the gaps between
``first_seq`` and ``last_seq``.  Reading verifies every checksum, the record
count and strictly increasing sequences inside ``[first_seq, last_seq]``;
``iter_snapshot`` raises ``SnapshotError`` at the first problem, so a
restorer that stages records and swaps only after the iterator is exhausted
never installs a damaged snapshot.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import cbor2

from store.api import StoredMsg
from store.errors import SnapshotError

__all__ = ["SnapshotHeader", "iter_snapshot", "write_snapshot"]

MAGIC = b"TJSNAP\x00\x01"
TRAILER = b"TJEND\x00\x00\x00"
_REC = struct.Struct("<QqHI")
_U32 = struct.Struct("<I")
_TRL = struct.Struct("<QI")
_RECORD_BYTES_MAX = 1 << 30


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    """Sequence bounds carried by a snapshot."""

    first_seq: int
    last_seq: int
    last_ts: int
    msgs: int


def write_snapshot(out: BinaryIO, header: SnapshotHeader, msgs: Iterable[StoredMsg]) -> None:
    """Write a snapshot.

    Args:
        out: Binary writer.
        header: Bounds; ``msgs`` must be exactly ``header.msgs`` long.
        msgs: Live messages in sequence order.

    Raises:
        SnapshotError: the iterable does not match ``header.msgs``.
    """
    out.write(MAGIC)
    h = cbor2.dumps(
        {
            "first_seq": header.first_seq,
            "last_seq": header.last_seq,
            "last_ts": header.last_ts,
            "msgs": header.msgs,
        }
    )
    out.write(_U32.pack(len(h)) + h + _U32.pack(zlib.crc32(h)))
    running = 0
    count = 0
    for m in msgs:
        subj = m.subject.encode()
        body = _REC.pack(m.seq, m.ts_ns, len(subj), len(m.headers)) + subj + m.headers + m.payload
        crc = zlib.crc32(body)
        out.write(_U32.pack(len(body)) + body + _U32.pack(crc))
        running = zlib.crc32(_U32.pack(crc), running)
        count += 1
    if count != header.msgs:
        raise SnapshotError(f"snapshot wrote {count} messages, header says {header.msgs}")
    out.write(TRAILER + _TRL.pack(count, running))


def _read_exact(src: BinaryIO, n: int) -> bytes:
    b = src.read(n)
    if len(b) != n:
        raise SnapshotError("snapshot truncated")
    return b


def read_header(src: BinaryIO) -> SnapshotHeader:
    """Read and verify the magic and header.

    Raises:
        SnapshotError: bad magic, truncated, or bad checksum.
    """
    if _read_exact(src, len(MAGIC)) != MAGIC:
        raise SnapshotError("not a trijet stream snapshot (bad magic)")
    (hlen,) = _U32.unpack(_read_exact(src, 4))
    if hlen > 1 << 16:
        raise SnapshotError("snapshot header too large")
    h = _read_exact(src, hlen)
    (crc,) = _U32.unpack(_read_exact(src, 4))
    if zlib.crc32(h) != crc:
        raise SnapshotError("snapshot header checksum mismatch")
    try:
        d = cbor2.loads(h)
        hdr = SnapshotHeader(
            int(d["first_seq"]), int(d["last_seq"]), int(d["last_ts"]), int(d["msgs"])
        )
    except (KeyError, TypeError, ValueError, cbor2.CBORDecodeError) as e:
        raise SnapshotError(f"snapshot header malformed: {e}") from e
    if hdr.msgs < 0 or hdr.last_seq < 0 or hdr.first_seq < 0:
        raise SnapshotError("snapshot header has negative fields")
    return hdr


def iter_snapshot(src: BinaryIO, header: SnapshotHeader) -> Iterator[StoredMsg]:
    """Yield the verified messages after ``read_header``; checks the trailer.

    Raises:
        SnapshotError: at the first malformed or failing record, or a bad trailer.
    """
    running = 0
    prev = 0
    for _ in range(header.msgs):
        (blen,) = _U32.unpack(_read_exact(src, 4))
        if blen < _REC.size or blen > _RECORD_BYTES_MAX:
            raise SnapshotError("snapshot record length out of range")
        body = _read_exact(src, blen)
        (crc,) = _U32.unpack(_read_exact(src, 4))
        if zlib.crc32(body) != crc:
            raise SnapshotError("snapshot record checksum mismatch")
        seq, ts, slen, hlen = _REC.unpack_from(body)
        if _REC.size + slen + hlen > blen:
            raise SnapshotError("snapshot record lengths inconsistent")
        if seq <= prev or seq > header.last_seq:
            raise SnapshotError(f"snapshot sequence {seq} out of order/range")
        prev = seq
        o = _REC.size
        subj = body[o : o + slen].decode()
        hdrs = body[o + slen : o + slen + hlen]
        payload = body[o + slen + hlen :]
        running = zlib.crc32(_U32.pack(crc), running)
        yield StoredMsg(seq, subj, hdrs, payload, ts)
    if _read_exact(src, len(TRAILER)) != TRAILER:
        raise SnapshotError("snapshot trailer missing")
    count, total = _TRL.unpack(_read_exact(src, _TRL.size))
    if count != header.msgs or total != running:
        raise SnapshotError("snapshot trailer mismatch")
