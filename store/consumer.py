"""File-backed consumer state: a compacted state file plus an append-only log.

Theory of operation
-------------------
A consumer's state is small (positions plus the pending and redelivery maps)
and changes with every delivery batch and every ack batch.  ``save`` only
keeps the latest state, encoded at once (in the caller's thread: ``sync``
usually runs in a sync thread, where Python work would compete for the GIL);
``sync`` makes it durable by *appending* it, whole, to ``log`` and fsyncing
that one file -- no temp file, no rename, no directory fsync on the hot path:

* ``log`` = ``b"TJCL" | u8 version`` then records
  ``u32 len | u32 crc32(body) | body`` (body: cbor2, integer keys, no pickle),
  then zeros: the file is kept filled with zeros up to
  ``LOG_PREALLOC_BYTES``, so an append overwrites allocated blocks and its
  fdatasync need not commit a file size change (~40 % cheaper here).  A
  zero length ends the log.  The last complete record is the current state.
* ``state`` = ``b"TJCS" | u8 version | u32 crc32(body) | body``: the state
  at the last compaction.

Compaction (when the log outgrows ``LOG_COMPACT_BYTES`` and a few records,
and at ``close``) writes ``state.tmp``, fsyncs it, renames it over ``state``,
fsyncs the directory, then truncates the log back to its header.  The log's
last record is never older than ``state`` (compaction writes the state that
was just appended), so a crash anywhere leaves a readable newest state:

* mid-append: the torn record fails its length or checksum and is cut at
  open; the previous record (or ``state``) is the state;
* mid-compaction: a torn ``state.tmp`` is removed at open; after the rename
  but before the truncation, the log still ends with the same state.

Cutting (a torn tail, a compaction) is an ``ftruncate`` made durable before
the file is filled with zeros again: a crash never leaves stale records
behind the end for the walk to take as newer.

A ``state`` file that fails its checksum, or a log with a bad header, raises
``CorruptionError`` rather than silently restarting the consumer from zero.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cbor2

from store.api import ConsumerState, ConsumerStore, Pending
from store.errors import CorruptionError, StoreClosed

__all__ = ["FileConsumerStore", "decode_consumer_state", "encode_consumer_state", "scan_log"]

_MAGIC = b"TJCS"
_VERSION = 1
_HDR = struct.Struct("<4sBI")
_LOG_HEADER = b"TJCL\x01"
_REC = struct.Struct("<II")
LOG_COMPACT_BYTES = 1 << 20
"""The log is compacted into ``state`` once it is larger than this..."""
LOG_COMPACT_RECORDS_MIN = 8
"""...and than this many records of the current state's size."""
LOG_PREALLOC_BYTES = LOG_COMPACT_BYTES + (64 << 10)
"""The log file is kept filled with zeros up to this size."""


def encode_consumer_state(state: ConsumerState) -> bytes:
    """CBOR body of a consumer state (no framing)."""
    return cbor2.dumps(
        [
            state.delivered_consumer_seq,
            state.delivered_stream_seq,
            state.ack_floor_consumer_seq,
            state.ack_floor_stream_seq,
            {s: list(p) for s, p in state.pending.items()},  # [consumer_seq, ts_ns]
            dict(state.redelivered),
            state.started,
        ]
    )


def decode_consumer_state(body: bytes) -> ConsumerState:
    """Inverse of ``encode_consumer_state``.

    A body of six fields (written before ``started`` was kept) decodes as
    started: the first state a consumer saves is the one after its creation
    chose the start.

    Raises:
        ValueError: malformed body.
    """
    try:
        v: Any = cbor2.loads(body)
        if len(v) == 6:
            v = [*v, True]
        dc, ds, ac, as_, pend, red, started = v
        return ConsumerState(
            delivered_consumer_seq=int(dc),
            delivered_stream_seq=int(ds),
            ack_floor_consumer_seq=int(ac),
            ack_floor_stream_seq=int(as_),
            pending={int(k): Pending(int(p[0]), int(p[1])) for k, p in pend.items()},
            redelivered={int(k): int(n) for k, n in red.items()},
            started=bool(started),
        )
    except (TypeError, ValueError, KeyError, IndexError, cbor2.CBORDecodeError) as e:
        raise ValueError(f"malformed consumer state: {e}") from e


def fsync_dir(path: Path) -> None:
    """fsync a directory so renames/creates/unlinks in it are durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileConsumerStore:
    """A ``ConsumerStore`` persisted in ``<directory>/state`` and ``<directory>/log``.

    Args:
        directory: Created if missing; one directory per consumer.

    Raises:
        CorruptionError: ``state`` fails its checksum or ``log`` its header.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._dir = Path(directory)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._path = self._dir / "state"
        self._tmp = self._dir / "state.tmp"
        self._log_path = self._dir / "log"
        self._closed = False
        self._dirty = False
        self._body = b""  # the encoded state saved last
        if self._tmp.exists():
            self._tmp.unlink()
        self._state = self._read() if self._path.exists() else ConsumerState()
        self._log_fd = -1
        self._log_bytes = 0
        self._log_records = 0
        self._open_log()

    def _read(self) -> ConsumerState:
        data = self._path.read_bytes()
        if len(data) < _HDR.size:
            raise CorruptionError(str(self._path), 0, 0, "short")
        magic, ver, crc = _HDR.unpack_from(data)
        body = data[_HDR.size :]
        if magic != _MAGIC or ver != _VERSION:
            raise CorruptionError(str(self._path), 0, 0, "header")
        if zlib.crc32(body) != crc:
            raise CorruptionError(str(self._path), _HDR.size, 0, "crc")
        try:
            return decode_consumer_state(body)
        except ValueError as e:
            raise CorruptionError(str(self._path), _HDR.size, 0, "decode") from e

    def _open_log(self) -> None:
        """Open the log, take its last complete record, cut a torn tail."""
        fd = os.open(self._log_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            data = b""
            while chunk := os.read(fd, 1 << 20):
                data += chunk
            if len(data) < len(_LOG_HEADER):  # new, or torn while being created
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                os.write(fd, _LOG_HEADER)
                os.fsync(fd)
                fsync_dir(self._dir)
                data = _LOG_HEADER
            elif data[: len(_LOG_HEADER)] != _LOG_HEADER:
                raise CorruptionError(str(self._log_path), 0, 0, "header")
            end, last, records = scan_log(data)
            if last is not None:
                try:
                    self._state = decode_consumer_state(last)
                except ValueError as e:  # checksummed but undecodable: not a torn tail
                    raise CorruptionError(str(self._log_path), end, 0, "decode") from e
            if data.count(0, end) != len(data) - end:  # torn tail of a crashed append
                os.ftruncate(fd, end)
                os.fsync(fd)
                data = data[:end]
            if len(data) < LOG_PREALLOC_BYTES:
                _zero_fill(fd, len(data), LOG_PREALLOC_BYTES)
            os.lseek(fd, end, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        self._log_fd, self._log_bytes, self._log_records = fd, end, records

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("consumer store is closed")

    def load(self) -> ConsumerState:
        """See ``ConsumerStore.load``."""
        self._check_open()
        return self._state

    def save(self, state: ConsumerState) -> None:
        """See ``ConsumerStore.save`` (the state is encoded here, not in ``sync``)."""
        self._check_open()
        self._state = state
        self._body = encode_consumer_state(state)
        self._dirty = True

    def sync(self) -> None:
        """See ``ConsumerStore.sync``: one appended record, one fsync of the log
        (compacting first when the log has grown past its bound)."""
        self._check_open()
        if not self._dirty:
            return
        body = self._body
        os.write(self._log_fd, _REC.pack(len(body), zlib.crc32(body)) + body)
        os.fdatasync(self._log_fd)
        self._log_bytes += _REC.size + len(body)
        self._log_records += 1
        self._dirty = False
        if self._log_bytes > max(LOG_COMPACT_BYTES, LOG_COMPACT_RECORDS_MIN * len(body)):
            self._compact(body)

    def _compact(self, body: bytes) -> None:
        """Write ``body`` (the state just logged) as ``state``, then empty the log."""
        data = _HDR.pack(_MAGIC, _VERSION, zlib.crc32(body)) + body
        fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self._tmp, self._path)
        fsync_dir(self._dir)
        os.ftruncate(self._log_fd, len(_LOG_HEADER))
        os.fsync(self._log_fd)
        _zero_fill(self._log_fd, len(_LOG_HEADER), LOG_PREALLOC_BYTES)
        os.lseek(self._log_fd, len(_LOG_HEADER), os.SEEK_SET)
        self._log_bytes, self._log_records = len(_LOG_HEADER), 0

    def delete(self) -> None:
        """See ``ConsumerStore.delete``."""
        if not self._closed:
            os.close(self._log_fd)
        self._closed = True
        for p in (self._path, self._tmp, self._log_path):
            if p.exists():
                p.unlink()
        fsync_dir(self._dir)

    def close(self) -> None:
        """See ``ConsumerStore.close``: syncs and compacts (the log ends empty)."""
        if self._closed:
            return
        self.sync()
        if self._log_records:
            self._compact(encode_consumer_state(self._state))
        os.close(self._log_fd)
        self._closed = True


def _zero_fill(fd: int, start: int, end: int) -> None:
    """Write zeros over ``[start, end)`` of ``fd`` and make them durable."""
    chunk = bytes(64 << 10)
    pos = start
    while pos < end:
        pos += os.pwrite(fd, chunk[: end - pos], pos)
    os.fdatasync(fd)


def scan_log(data: bytes) -> tuple[int, bytes | None, int]:
    """Walk a consumer log (header included): ``(end of the last complete
    record, its body or None, complete records)``; a zero length (the
    preallocated zeros), a short or a failing record ends the walk."""
    pos, last, records = len(_LOG_HEADER), None, 0
    while pos + _REC.size <= len(data):
        n, crc = _REC.unpack_from(data, pos)
        if n == 0:
            break
        body = data[pos + _REC.size : pos + _REC.size + n]
        if len(body) < n or zlib.crc32(body) != crc:
            break
        pos += _REC.size + n
        last, records = body, records + 1
    return pos, last, records


if TYPE_CHECKING:

    def _conforms(c: FileConsumerStore) -> ConsumerStore:
        return c
