"""A segment's index checkpoint file (``.idx``): encoding, reading, verifying.

Format 2 (``store.file.format`` describes it) starts with a small CBOR *summary*
— entry and live counts, bytes, floor, tombstones, the segment's subjects with
their count/first/last — under its own CRC, followed by the *body* (the
per-entry arrays) under another, so a sealed segment can be opened from the
summary alone and its arrays read on first use.  Format 1 (``IDX_MAGIC``: one
CRC over one CBOR map) is still read.  Encoding runs in the segment's
checkpoint thread, a large map ``CBOR_SLICE`` entries per ``cbor2`` call so the
GIL is released between slices.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from array import array
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from itertools import compress
from pathlib import Path
from typing import Any

import cbor2

__all__ = [
    "CBOR_SLICE",
    "IDX2_HEAD",
    "IDX2_MAGIC",
    "IDX_MAGIC",
    "SubjectStats",
    "cbor_dumps_sliced",
    "checkpoint_body_ok",
    "encode_checkpoint",
    "fsync_dir",
    "load_checkpoint",
    "read_checkpoint_body",
    "read_checkpoint_summary",
    "read_file_crc",
    "stats_of",
]

IDX_MAGIC = b"TJIX\x01"
IDX2_MAGIC = b"TJIX\x02"
IDX2_HEAD = struct.Struct("<5sII")  # magic, summary length, crc32(summary)

SubjectStats = dict[int, list[int]]
"""subject id -> [count, first_seq, last_seq] over live entries."""


def read_file_crc(path: Path, size: int) -> int:
    """CRC32 of the first ``size`` bytes of ``path`` (1 MiB reads)."""
    crc = 0
    with open(path, "rb") as f:
        left = size
        while left > 0:
            b = f.read(min(left, 1 << 20))
            if not b:
                break
            crc = zlib.crc32(b, crc)
            left -= len(b)
    return crc


#: map entries per ``cbor2.dumps`` call when a checkpoint is encoded in the
#: background: each call holds the GIL, so a large map is encoded in slices
CBOR_SLICE = 2048


def cbor_head(major: int, n: int) -> bytes:
    """A CBOR item head (major type, argument) in its shortest form, as cbor2 writes it."""
    m = major << 5
    if n < 24:
        return bytes((m | n,))
    if n < 0x100:
        return bytes((m | 24, n))
    if n < 0x10000:
        return bytes((m | 25,)) + n.to_bytes(2, "big")
    if n < 0x100000000:
        return bytes((m | 26,)) + n.to_bytes(4, "big")
    return bytes((m | 27,)) + n.to_bytes(8, "big")


def cbor_dumps_sliced(d: dict[str, Any]) -> bytes:
    """``cbor2.dumps(d)``, byte for byte, with every large map value encoded
    ``CBOR_SLICE`` entries per call (the GIL is released between calls)."""
    parts = [cbor_head(5, len(d))]
    for k, v in d.items():
        parts.append(cbor2.dumps(k))
        if not isinstance(v, dict) or len(v) <= CBOR_SLICE:
            parts.append(cbor2.dumps(v))
            continue
        items = list(v.items())
        parts.append(cbor_head(5, len(items)))
        for i in range(0, len(items), CBOR_SLICE):
            flat = [x for kv in items[i : i + CBOR_SLICE] for x in kv]
            enc = cbor2.dumps(flat)
            parts.append(enc[len(cbor_head(4, len(flat))) :])
    return b"".join(parts)


def stats_of(sids: array[int], live: bytes | bytearray, nlive: int, base: int) -> SubjectStats:
    """Per-subject [count, first, last] over live entries (C-speed where possible)."""
    if nlive == len(sids):
        counts = Counter(sids)
    else:
        counts = Counter(compress(sids, live))
    out: SubjectStats = {}
    if len(counts) <= 32:
        rev = sids[::-1]
        n = len(sids)
        for sid, c in counts.items():
            i = sids.index(sid)
            while not live[i]:
                i = sids.index(sid, i + 1)
            j = rev.index(sid)
            while not live[n - 1 - j]:
                j = rev.index(sid, j + 1)
            out[sid] = [c, base + i, base + n - 1 - j]
        return out
    # many subjects (the KV shape): first and last positions by dicts built
    # in C (a later key overwrites an earlier one), one step per subject after
    if nlive == len(sids):
        pos: list[int] | range = range(len(sids))
        ids: array[int] | list[int] = sids
    else:
        pos = list(compress(range(len(sids)), live))
        ids = list(compress(sids, live))
    last = dict(zip(ids, pos, strict=True))
    first = dict(zip(reversed(ids), reversed(pos), strict=True))
    return {sid: [c, base + first[sid], base + last[sid]] for sid, c in counts.items()}


def encode_checkpoint(
    summary: dict[str, Any],
    body: dict[str, Any],
    sids: array[int],
    live: bytes,
    nlive: int,
    base: int,
    names: list[str],
) -> bytes:
    """A format-2 checkpoint: ``summary`` and ``body`` completed with the
    segment's subjects, numbered locally (0.. in the order of the store's ids):
    the summary gets their names and per-subject count/first/last, the body
    the per-entry local subject ids.  Costs a pass over the entries in C
    (``map``) and one per subject; runs in the checkpoint thread."""
    used = sorted(set(sids))
    if used == list(range(len(used))):
        lsids = sids
    else:
        loc = {g: i for i, g in enumerate(used)}
        lsids = array("I", map(loc.__getitem__, sids))
    stats = stats_of(sids, live, nlive, base)
    cnt = array("Q", bytes(8 * len(used)))
    first = array("Q", cnt)
    last = array("Q", cnt)
    for i, g in enumerate(used):
        st = stats.get(g)
        if st is not None:
            cnt[i], first[i], last[i] = st
    summary = dict(summary)
    summary["names"] = [names[g] for g in used]
    summary["cnt"] = cnt.tobytes()
    summary["first"] = first.tobytes()
    summary["last"] = last.tobytes()
    body = dict(body)
    body["sids"] = lsids.tobytes()
    sb = cbor_dumps_sliced(summary)
    bb = cbor_dumps_sliced(body)
    head = IDX2_HEAD.pack(IDX2_MAGIC, len(sb), zlib.crc32(sb))
    return b"".join((head, sb, zlib.crc32(bb).to_bytes(4, "little"), bb))


def read_checkpoint_summary(path: Path) -> tuple[dict[str, Any], int] | None:
    """The summary of a format-2 checkpoint and the file offset of its body
    (CRC then CBOR); ``None`` if missing, of another format, or bad.  Reads
    the summary only."""
    try:
        with open(path, "rb") as f:
            head = f.read(IDX2_HEAD.size)
            if len(head) < IDX2_HEAD.size or head[:5] != IDX2_MAGIC:
                return None
            _m, n, crc = IDX2_HEAD.unpack(head)
            sb = f.read(n)
    except FileNotFoundError:
        return None
    if len(sb) != n or zlib.crc32(sb) != crc:
        return None
    try:
        d = cbor2.loads(sb)
    except Exception:  # any decode failure means "stale"
        return None
    return (d, IDX2_HEAD.size + n) if isinstance(d, dict) else None


def read_checkpoint_body(path: Path, off: int) -> dict[str, Any] | None:
    """The body of a format-2 checkpoint at ``off``; ``None`` if bad."""
    try:
        with open(path, "rb") as f:
            f.seek(off)
            data = f.read()
    except FileNotFoundError:
        return None
    if len(data) < 4 or zlib.crc32(memoryview(data)[4:]) != int.from_bytes(data[:4], "little"):
        return None
    try:
        d = cbor2.loads(memoryview(data)[4:])
    except Exception:  # any decode failure means "stale"
        return None
    return d if isinstance(d, dict) else None


def checkpoint_body_ok(path: Path, off: int) -> bool:
    """Whether the body of a format-2 checkpoint passes its CRC (not decoded)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False
    b = memoryview(data)[off:]
    return len(b) >= 4 and zlib.crc32(b[4:]) == int.from_bytes(b[:4], "little")


def _as_format1(summary: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """A format-2 checkpoint as one dict with the keys format 1 had."""
    d = {k: v for k, v in summary.items() if k not in ("names", "cnt", "first", "last")}
    d.update(body)
    names = summary["names"]
    d["subj"] = dict(enumerate(names))
    cnt, first, last = array("Q"), array("Q"), array("Q")
    cnt.frombytes(summary["cnt"])
    first.frombytes(summary["first"])
    last.frombytes(summary["last"])
    d["stats"] = {i: [cnt[i], first[i], last[i]] for i in range(len(names)) if cnt[i]}
    return d


def load_checkpoint(path: Path) -> dict[str, Any] | None:
    """Read and verify a checkpoint file, whole; ``None`` if missing or bad.
    Either format comes back as format 1's keys (``subj`` and ``stats`` by
    the checkpoint's own subject numbering)."""
    got = read_checkpoint_summary(path)
    if got is not None:
        body = read_checkpoint_body(path, got[1])
        if body is None:
            return None
        try:
            return _as_format1(got[0], body)
        except (KeyError, TypeError, ValueError, IndexError):
            return None
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if len(data) < 9 or data[:5] != IDX_MAGIC:
        return None
    raw = data[9:]
    if zlib.crc32(raw) != int.from_bytes(data[5:9], "little"):
        return None
    try:
        d = cbor2.loads(raw)
    except Exception:  # any decode failure means "stale"
        return None
    return d if isinstance(d, dict) else None


def fsync_dir(path: Path) -> None:
    """fsync a directory so creates/renames/unlinks in it are durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def checkpoint_pool() -> ThreadPoolExecutor:
    """The one background thread that writes segments' checkpoints, in order."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seg-checkpoint")
        return _pool


def checkpoints_settled() -> None:
    """Return once every background checkpoint submitted so far is written (the
    pool's one worker runs jobs in order).  For callers that drop a store without
    closing it, e.g. a test removing its directory."""
    with _pool_lock:
        pool = _pool
    if pool is not None:
        pool.submit(lambda: None).result()
