"""File-backed consumer state.

Theory of operation
-------------------
A consumer's state is small (positions plus the pending and redelivery maps),
so it is rewritten whole rather than logged.  ``save`` only keeps the latest
state in memory; ``sync`` writes it crash-safely:

1. encode with cbor2 (integer keys, no pickle), frame as
   ``b"TJCS" | u8 version | u32 crc32(body) | body``,
2. write ``state.tmp``, fsync it,
3. ``rename`` over ``state`` (atomic on POSIX), fsync the directory.

A crash at any point leaves either the old or the new complete file; a torn
``state.tmp`` is ignored and removed at open.  A ``state`` file that fails its
checksum raises ``CorruptionError`` rather than silently restarting the
consumer from zero.
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

__all__ = ["FileConsumerStore", "decode_consumer_state", "encode_consumer_state"]

_MAGIC = b"TJCS"
_VERSION = 1
_HDR = struct.Struct("<4sBI")


def encode_consumer_state(state: ConsumerState) -> bytes:
    """CBOR body of a consumer state (no framing)."""
    return cbor2.dumps(
        [
            state.delivered_consumer_seq,
            state.delivered_stream_seq,
            state.ack_floor_consumer_seq,
            state.ack_floor_stream_seq,
            {s: [p.consumer_seq, p.ts_ns] for s, p in state.pending.items()},
            dict(state.redelivered),
        ]
    )


def decode_consumer_state(body: bytes) -> ConsumerState:
    """Inverse of ``encode_consumer_state``.

    Raises:
        ValueError: malformed body.
    """
    try:
        v: Any = cbor2.loads(body)
        dc, ds, ac, as_, pend, red = v
        return ConsumerState(
            delivered_consumer_seq=int(dc),
            delivered_stream_seq=int(ds),
            ack_floor_consumer_seq=int(ac),
            ack_floor_stream_seq=int(as_),
            pending={int(k): Pending(int(p[0]), int(p[1])) for k, p in pend.items()},
            redelivered={int(k): int(n) for k, n in red.items()},
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
    """A ``ConsumerStore`` persisted in ``<directory>/state``.

    Args:
        directory: Created if missing; one directory per consumer.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._dir = Path(directory)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._path = self._dir / "state"
        self._tmp = self._dir / "state.tmp"
        self._closed = False
        self._dirty = False
        if self._tmp.exists():
            self._tmp.unlink()
        self._state = self._read() if self._path.exists() else ConsumerState()

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

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("consumer store is closed")

    def load(self) -> ConsumerState:
        """See ``ConsumerStore.load``."""
        self._check_open()
        return self._state

    def save(self, state: ConsumerState) -> None:
        """See ``ConsumerStore.save``."""
        self._check_open()
        self._state = state
        self._dirty = True

    def sync(self) -> None:
        """See ``ConsumerStore.sync``."""
        self._check_open()
        if not self._dirty:
            return
        body = encode_consumer_state(self._state)
        data = _HDR.pack(_MAGIC, _VERSION, zlib.crc32(body)) + body
        fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self._tmp, self._path)
        fsync_dir(self._dir)
        self._dirty = False

    def delete(self) -> None:
        """See ``ConsumerStore.delete``."""
        self._closed = True
        for p in (self._path, self._tmp):
            if p.exists():
                p.unlink()
        fsync_dir(self._dir)

    def close(self) -> None:
        """See ``ConsumerStore.close``."""
        if self._closed:
            return
        self.sync()
        self._closed = True


if TYPE_CHECKING:

    def _conforms(c: FileConsumerStore) -> ConsumerStore:
        return c
