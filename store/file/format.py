"""On-disk formats of the file store: segment header, records, chunks, index.

Theory of operation
-------------------
A stream is a directory of *segments* ``seg-<base:020d>.tjs``.  Each opens
with a 36-byte header::

    magic b"TJSG" | u8 version | u8 flags | u16 0 | u64 base_seq
    | i64 prev_last_ts | u64 floor | u32 crc32(previous 32 bytes)

``base_seq`` is the first sequence the segment may hold; ``prev_last_ts`` is
the stream's ``last_ts`` when the segment was created (so an empty segment
still states ``last_seq = base_seq - 1`` and its timestamp); ``floor`` says
every sequence below it was dead at creation.

The *body* is a log of records, each self-checking::

    u32 total_len | u8 kind | u64 seq | i64 ts | u16 slen | u32 hlen
    | subject | headers | payload | u32 crc32(all previous bytes)

``kind`` is MSG (a message; bit 0x80 = erased), TOMB (payload = u64 target
sequences now deleted), FLOOR (``seq`` = every sequence below is deleted) or
SEAL (the last record of a sealed segment: a segment that is not the last one
but lacks it was cut, which recovery reports).
Record positions are *logical* offsets into the body.  An uncompressed body
is stored as is.  A sealed segment may be stored compressed (flag bit 0) as
a run of independent lz4 chunks, each holding whole records::

    magic b"TJCK" | u64 logical_start | u32 raw_len | u32 comp_len
    | u32 crc32(compressed) | u32 crc32(previous 24 bytes) | lz4 block

so one bad chunk loses only its records, and the chunk magic lets recovery
resynchronise after damage.  The *index checkpoint* ``seg-<base>.idx`` holds a
segment's in-memory index (arrays as raw bytes, CBOR-framed, CRC-checked) and
the size and CRC of the segment bytes it describes; a checkpoint that does
not match its segment is ignored and the segment is rescanned.  Format 2
(``store.file.checkpoint.encode_checkpoint``) is written now::

    b"TJIX\x02" | u32 summary_len | u32 crc32(summary) | summary (CBOR)
    | u32 crc32(body) | body (CBOR)

The *summary* is what an open needs: file size and CRC, entry/live counts and
live bytes, last timestamp, floor, tombstones, how many msg ids and TTL facts
the body holds, and the segment's subjects (names, numbered locally) with
each one's live count, first and last sequence.  The *body* holds the
per-entry arrays (subject ids local), chunk tables, msg ids and TTL facts,
read on first use.  Format 1 (``b"TJIX\x01"``, one CBOR map) is still read.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

__all__ = [
    "CHUNK_HDR",
    "CHUNK_MAGIC",
    "FLAG_COMPRESSED",
    "KIND_ERASED",
    "KIND_FLOOR",
    "KIND_MSG",
    "KIND_SEAL",
    "KIND_TOMB",
    "NONE_OFF",
    "REC_HDR",
    "REC_OVERHEAD",
    "SEG_HDR",
    "SEG_HDR_SIZE",
    "SegHeader",
    "decode_seg_header",
    "encode_chunk",
    "encode_record",
    "encode_seg_header",
    "idx_name",
    "seg_name",
]

SEG_MAGIC = b"TJSG"
SEG_VERSION = 1
FLAG_COMPRESSED = 0x01
SEG_HDR = struct.Struct("<4sBBHQqQ")
SEG_HDR_SIZE = SEG_HDR.size + 4  # + crc

KIND_MSG = 1
KIND_TOMB = 2
KIND_FLOOR = 3
KIND_SEAL = 4
KIND_ERASED = 0x80
_KINDS = frozenset({KIND_MSG, KIND_MSG | KIND_ERASED, KIND_TOMB, KIND_FLOOR, KIND_SEAL})

REC_HDR = struct.Struct("<IBQqHI")
REC_OVERHEAD = REC_HDR.size + 4
_U32 = struct.Struct("<I")
NONE_OFF = 0xFFFFFFFF
RECORD_BYTES_MAX = 64 << 20

CHUNK_MAGIC = b"TJCK"
CHUNK_HDR = struct.Struct("<4sQIII")
CHUNK_HDR_SIZE = CHUNK_HDR.size + 4


def seg_name(base: int) -> str:
    """File name of the segment starting at ``base``."""
    return f"seg-{base:020d}.tjs"


def idx_name(base: int) -> str:
    """File name of the index checkpoint of the segment at ``base``."""
    return f"seg-{base:020d}.idx"


@dataclass(frozen=True, slots=True)
class SegHeader:
    """Decoded segment header."""

    version: int
    flags: int
    base_seq: int
    prev_last_ts: int
    floor: int


def encode_seg_header(h: SegHeader) -> bytes:
    """Encode a segment header (with its CRC)."""
    b = SEG_HDR.pack(SEG_MAGIC, h.version, h.flags, 0, h.base_seq, h.prev_last_ts, h.floor)
    return b + _U32.pack(zlib.crc32(b))


def decode_seg_header(b: bytes) -> SegHeader | None:
    """Decode and verify a segment header; ``None`` if invalid."""
    if len(b) < SEG_HDR_SIZE:
        return None
    (crc,) = _U32.unpack_from(b, SEG_HDR.size)
    if zlib.crc32(b[: SEG_HDR.size]) != crc:
        return None
    magic, ver, flags, _, base, plts, floor = SEG_HDR.unpack_from(b)
    if magic != SEG_MAGIC or ver != SEG_VERSION:
        return None
    return SegHeader(ver, flags, base, plts, floor)


def encode_record(kind: int, seq: int, ts: int, subj: bytes, hdr: bytes, payload: bytes) -> bytes:
    """Encode one record (header, data, CRC)."""
    total = REC_OVERHEAD + len(subj) + len(hdr) + len(payload)
    b = REC_HDR.pack(total, kind, seq, ts, len(subj), len(hdr)) + subj + hdr + payload
    return b + _U32.pack(zlib.crc32(b))


def check_record(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """Length of a valid record at ``pos`` in ``buf``, or 0 if there is none.

    Valid means: header fits, lengths consistent, kind known, CRC matches.
    """
    n = len(buf)
    if pos + REC_OVERHEAD > n:
        return 0
    total, kind, _seq, _ts, slen, hlen = REC_HDR.unpack_from(buf, pos)
    if total < REC_OVERHEAD or total > RECORD_BYTES_MAX or pos + total > n:
        return 0
    if kind not in _KINDS or REC_OVERHEAD + slen + hlen > total:
        return 0
    (crc,) = _U32.unpack_from(buf, pos + total - 4)
    if zlib.crc32(memoryview(buf)[pos : pos + total - 4]) != crc:
        return 0
    return int(total)


def encode_chunk(logical_start: int, raw: bytes, comp: bytes) -> bytes:
    """Frame one compressed chunk."""
    h = CHUNK_HDR.pack(CHUNK_MAGIC, logical_start, len(raw), len(comp), zlib.crc32(comp))
    return h + _U32.pack(zlib.crc32(h)) + comp


def decode_chunk_header(buf: bytes | memoryview, pos: int) -> tuple[int, int, int, int] | None:
    """``(logical_start, raw_len, comp_len, data_crc)`` if a valid chunk header
    is at ``pos`` (data not checked), else ``None``."""
    if pos + CHUNK_HDR_SIZE > len(buf):
        return None
    magic, lstart, rlen, clen, dcrc = CHUNK_HDR.unpack_from(buf, pos)
    if magic != CHUNK_MAGIC:
        return None
    (hcrc,) = _U32.unpack_from(buf, pos + CHUNK_HDR.size)
    if zlib.crc32(memoryview(buf)[pos : pos + CHUNK_HDR.size]) != hcrc:
        return None
    return int(lstart), int(rlen), int(clen), int(dcrc)
