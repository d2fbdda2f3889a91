"""Stream archives: the bytes ``STREAM.SNAPSHOT`` sends and ``STREAM.RESTORE`` takes.

Theory of operation
-------------------
An archive carries everything needed to rebuild a stream exactly: its
config, its creation time and the stream state machine's snapshot document
(``StreamStateMachine.snapshot()``: policy, ``last_msg_id``, the dedupe
table, and the store's snapshot with every live message -- sequence,
subject, headers, payload, timestamp -- and the sequence bounds, so interior
deletes are the gaps); and, as nats-server's snapshots do unless asked
``no_consumers``, the stream's consumers (``ArchivedConsumer``: name,
config, creation time and ``ConsumerState`` -- delivered and ack floor
sequences, pending acks with their timer start, redelivery counts).  The
format is trijet's own: nats-server's archives are a tar of its file store
and are not byte compatible in either direction (a nats-server archive is
refused with ``not a trijet stream archive``).

Container.  Clients treat the snapshot as an S2 stream (the ``nats`` CLI
runs the received bytes through an S2 reader to count progress and fails on
anything that is not one), so an archive is a valid Snappy *framing format*
stream, which S2 readers accept: the stream identifier chunk
(``ff 06 00 00 "sNaPpY"``) and then skippable chunks of type ``0x80``
(``0x80``, 24-bit little-endian length, at most ``FRAME_BYTES_MAX`` bytes of
payload).  Skippable chunks carry no CRC-32C (which Python cannot compute at
speed without a C extension); an S2 reader skips them and decodes zero bytes,
so the CLI's "uncompressed bytes" figure reads 0.  The archive is not
compressed.

Payload (the concatenated chunk bodies)::

    magic     b"TJARCH\\x00\\x01"                              8 bytes
    header    u32 length, CBOR map      {"v", "config", "created_ns", "doc_bytes", "cons_bytes"}
              "config": the StreamConfig JSON text (``to_dict``)
    document  ``doc_bytes`` bytes: the state machine's snapshot document
    consumers ``cons_bytes`` bytes: a CBOR array of maps
              {"name", "config" (ConsumerConfig JSON text), "created_ns",
              "state" (``store.consumer.encode_consumer_state`` bytes)}
    digest    SHA-256 of everything above                   32 bytes

Versions: 2 is written.  Version 1 (before consumers were archived) has no
``cons_bytes`` key and no consumers section, and still reads (no
consumers).  Consumers are decoded and checked in ``finish``, so a damaged
consumer entry refuses the whole archive before anything is created.

``ArchiveDecoder`` parses the container incrementally as chunks arrive and
verifies the payload in ``finish``: a damaged container fails with S2's
words (``s2: corrupt input``, ``s2: unsupported input``), a short payload
with ``unexpected EOF``, a bad digest with ``archive checksum mismatch``.
The document itself is verified again, record by record, by the state
machine's ``restore``.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import cbor2

from cluster.consumer_model import ConsumerConfig
from cluster.model import StreamConfig
from store.api import ConsumerState
from store.consumer import decode_consumer_state, encode_consumer_state

__all__ = [
    "ARCHIVE_VERSION",
    "FRAME_BYTES_MAX",
    "Archive",
    "ArchiveDecoder",
    "ArchiveError",
    "ArchivedConsumer",
    "chunked",
    "encode_archive",
]

ARCHIVE_VERSION = 2
"""Version written in the archive header (1 still reads: no consumers)."""
ARCHIVE_VERSIONS_READ = (1, 2)

FRAME_BYTES_MAX = 65536
"""Payload bytes per skippable chunk (Snappy's block size, so any reader copes)."""

MAGIC = b"TJARCH\x00\x01"
HEADER_BYTES_MAX = 1 << 20
STREAM_ID = b"\xff\x06\x00\x00sNaPpY"
_S2_STREAM_BODIES = (b"sNaPpY", b"S2sTwO")
_TRIJET_CHUNK = 0x80
_STREAM_ID_CHUNK = 0xFF
_DIGEST_BYTES = 32
_U32 = struct.Struct("<I")

# The S2 reader's words (clients and nats-server print these).
ERR_CORRUPT = "s2: corrupt input"
ERR_UNSUPPORTED = "s2: unsupported input"
ERR_EOF = "unexpected EOF"


class ArchiveError(ValueError):
    """The bytes are not a complete, intact trijet stream archive."""


@dataclass(frozen=True, slots=True)
class ArchivedConsumer:
    """One consumer of an archived stream.

    Attributes:
        name: The consumer's name (durable or generated).
        config: Its config (defaults applied).
        created_ns: Its creation time (Unix ns).
        state: Its positions, pending acks and redelivery counts.
    """

    name: str
    config: ConsumerConfig
    created_ns: int
    state: ConsumerState


@dataclass(frozen=True, slots=True)
class Archive:
    """A decoded archive.

    Attributes:
        config: The stream's config when the snapshot was taken.
        created_ns: The stream's creation time (Unix ns).
        document: The stream state machine's snapshot document.
        consumers: The stream's consumers (none when the snapshot was asked
            ``no_consumers``, or for a version 1 archive).
    """

    config: StreamConfig
    created_ns: int
    document: bytes
    consumers: tuple[ArchivedConsumer, ...] = ()


def _encode_consumers(consumers: tuple[ArchivedConsumer, ...]) -> bytes:
    return cbor2.dumps(
        [
            {
                "name": c.name,
                "config": json.dumps(c.config.to_dict(), separators=(",", ":")),
                "created_ns": c.created_ns,
                "state": encode_consumer_state(c.state),
            }
            for c in consumers
        ]
    )


_CONSUMER_KEYS = {"name", "config", "created_ns", "state"}
_BAD_NAME = re.compile(r"[\s.*>/\\\x00]")
"""What a consumer name may not hold (nats-server's rule; it names a directory)."""


def _decode_consumers(raw: bytes) -> tuple[ArchivedConsumer, ...]:
    try:
        doc: Any = cbor2.loads(raw)
    except Exception as e:  # cbor2 raises many types; all mean "malformed"
        raise ArchiveError(f"archive consumers malformed: {e}") from e
    if type(doc) is not list:
        raise ArchiveError("archive consumers malformed")
    out: list[ArchivedConsumer] = []
    names: set[str] = set()
    for item in doc:
        if type(item) is not dict or set(item) != _CONSUMER_KEYS:
            raise ArchiveError("archive consumer malformed")
        name, cfg, created_ns, state = (item[k] for k in ("name", "config", "created_ns", "state"))
        if type(name) is not str or not name or name in names or _BAD_NAME.search(name):
            raise ArchiveError("archive consumer malformed")
        if type(cfg) is not str or type(created_ns) is not int or type(state) is not bytes:
            raise ArchiveError(f"archive consumer {name!r} malformed")
        try:
            config = ConsumerConfig.from_dict(json.loads(cfg))
            cstate = decode_consumer_state(state)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
            raise ArchiveError(f"archive consumer {name!r} malformed: {e}") from e
        names.add(name)
        out.append(ArchivedConsumer(name, config, created_ns, cstate))
    return tuple(out)


# --------------------------------------------------------------------------- writing


def _payload_pieces(archive: Archive) -> Iterator[bytes | memoryview]:
    consumers = _encode_consumers(archive.consumers)
    header = cbor2.dumps(
        {
            "v": ARCHIVE_VERSION,
            "config": json.dumps(archive.config.to_dict(), separators=(",", ":")),
            "created_ns": archive.created_ns,
            "doc_bytes": len(archive.document),
            "cons_bytes": len(consumers),
        }
    )
    head = MAGIC + _U32.pack(len(header)) + header
    digest = hashlib.sha256(head)
    digest.update(archive.document)
    digest.update(consumers)
    yield head
    yield memoryview(archive.document)
    yield consumers
    yield digest.digest()


def encode_archive(archive: Archive) -> Iterator[bytes]:
    """The archive's container bytes, piece by piece (one chunk of the
    framing format each; the document is never copied whole).

    Args:
        archive: What to write.

    Returns:
        An iterator of byte strings whose concatenation is the archive.
    """
    yield STREAM_ID
    for body in chunked(_payload_pieces(archive), FRAME_BYTES_MAX):
        yield bytes((_TRIJET_CHUNK,)) + len(body).to_bytes(3, "little") + body


def chunked(pieces: Iterable[bytes | memoryview], size: int) -> Iterator[bytes]:
    """Re-cut a byte stream into pieces of exactly ``size`` bytes (the last
    one shorter; nothing for an empty stream).

    Args:
        pieces: The stream, in pieces of any length.
        size: The length of every output piece but the last (> 0).
    """
    if size <= 0:
        raise ValueError("size must be positive")
    buf = bytearray()
    for piece in pieces:
        view = memoryview(piece)
        while len(view):
            take = min(size - len(buf), len(view))
            if not buf and take == size:
                yield bytes(view[:size])
            else:
                buf += view[:take]
                if len(buf) == size:
                    yield bytes(buf)
                    buf.clear()
            view = view[take:]
    if buf:
        yield bytes(buf)


# --------------------------------------------------------------------------- reading


class ArchiveDecoder:
    """Incremental reader of an archive arriving in arbitrary chunks.

    ``feed`` checks the container as it goes (and raises at the first
    damaged chunk header); ``finish`` verifies and decodes the payload.
    After an error the decoder stays failed: later calls raise it again.
    """

    def __init__(self) -> None:
        self._pending = bytearray()  # an incomplete chunk
        self._payload = bytearray()
        self._started = False
        self._foreign = False  # saw S2 data chunks (a nats-server archive)
        self._error: ArchiveError | None = None
        self.received = 0
        """Container bytes fed so far."""

    @property
    def payload_bytes(self) -> int:
        """Archive payload bytes collected so far."""
        return len(self._payload)

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the container.

        Raises:
            ArchiveError: the container is damaged (``s2: corrupt input`` /
                ``s2: unsupported input``).
        """
        if self._error is not None:
            raise self._error
        self.received += len(data)
        self._pending += data
        try:
            self._parse()
        except ArchiveError as err:
            self._error = err
            self._pending.clear()
            raise

    def _parse(self) -> None:
        buf = self._pending
        pos = 0
        while len(buf) - pos >= 4:
            kind = buf[pos]
            length = int.from_bytes(buf[pos + 1 : pos + 4], "little")
            if not self._started and kind != _STREAM_ID_CHUNK:
                raise ArchiveError(ERR_CORRUPT)
            if kind == _STREAM_ID_CHUNK and length != 6:
                raise ArchiveError(ERR_CORRUPT)
            if 0x02 <= kind <= 0x7F:
                raise ArchiveError(ERR_UNSUPPORTED)
            if len(buf) - pos - 4 < length:
                break
            body = buf[pos + 4 : pos + 4 + length]
            if kind == _STREAM_ID_CHUNK:
                if bytes(body) not in _S2_STREAM_BODIES:
                    raise ArchiveError(ERR_CORRUPT)
                self._started = True
            elif kind == _TRIJET_CHUNK:
                self._payload += body
            elif kind in (0x00, 0x01):
                self._foreign = True  # compressed/uncompressed S2 data: not ours
            pos += 4 + length
        del buf[:pos]

    def finish(self) -> Archive:
        """Verify and decode the archive after the last chunk.

        Raises:
            ArchiveError: damaged or incomplete container, foreign archive,
                short payload, bad digest, malformed header.
        """
        if self._error is not None:
            raise self._error
        try:
            return self._finish()
        except ArchiveError as err:
            self._error = err
            raise

    def _finish(self) -> Archive:
        if self._pending:
            raise ArchiveError(ERR_CORRUPT)
        if self._foreign and not self._payload:
            raise ArchiveError("not a trijet stream archive")
        data = memoryview(self._payload)
        if len(data) < len(MAGIC) + 4:
            raise ArchiveError(ERR_EOF)
        if bytes(data[: len(MAGIC)]) != MAGIC:
            raise ArchiveError("not a trijet stream archive")
        (hlen,) = _U32.unpack_from(data, len(MAGIC))
        if hlen > HEADER_BYTES_MAX:
            raise ArchiveError("archive header too large")
        start = len(MAGIC) + 4
        if len(data) < start + hlen:
            raise ArchiveError(ERR_EOF)
        config, created_ns, doc_bytes, cons_bytes = _decode_header(
            bytes(data[start : start + hlen])
        )
        doc_at = start + hlen
        cons_at = doc_at + doc_bytes
        end = cons_at + cons_bytes
        if len(data) < end + _DIGEST_BYTES:
            raise ArchiveError(ERR_EOF)
        if len(data) > end + _DIGEST_BYTES:
            raise ArchiveError("trailing bytes after the archive")
        if hashlib.sha256(data[:end]).digest() != bytes(data[end:]):
            raise ArchiveError("archive checksum mismatch")
        consumers = _decode_consumers(bytes(data[cons_at:end])) if cons_bytes else ()
        return Archive(config, created_ns, bytes(data[doc_at:cons_at]), consumers)


_HEADER_KEYS = {1: {"v", "config", "created_ns", "doc_bytes"}}
_HEADER_KEYS[2] = _HEADER_KEYS[1] | {"cons_bytes"}


def _decode_header(raw: bytes) -> tuple[StreamConfig, int, int, int]:
    try:
        doc: Any = cbor2.loads(raw)
    except Exception as e:  # cbor2 raises many types; all mean "malformed"
        raise ArchiveError(f"archive header malformed: {e}") from e
    if type(doc) is not dict or "v" not in doc:
        raise ArchiveError("archive header malformed")
    version = doc["v"]
    if type(version) is not int or version not in ARCHIVE_VERSIONS_READ:
        raise ArchiveError(f"unsupported archive version {version!r}")
    if set(doc) != _HEADER_KEYS[version]:
        raise ArchiveError("archive header malformed")
    created_ns, doc_bytes = doc["created_ns"], doc["doc_bytes"]
    cons_bytes = doc.get("cons_bytes", 0)
    if type(created_ns) is not int or type(doc_bytes) is not int or doc_bytes < 0:
        raise ArchiveError("archive header malformed")
    if type(cons_bytes) is not int or cons_bytes < 0:
        raise ArchiveError("archive header malformed")
    if type(doc["config"]) is not str:
        raise ArchiveError("archive header malformed")
    try:
        config = StreamConfig.from_dict(json.loads(doc["config"]))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
        raise ArchiveError(f"archive config malformed: {e}") from e
    return config, created_ns, doc_bytes, cons_bytes
