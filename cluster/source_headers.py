"""The ``Nats-Stream-Source`` header and the other header rewrites of copying.

Theory of operation
-------------------
A sourced message carries where it came from in ``Nats-Stream-Source:
<stream> <seq> <filters> <dests> <subject> <identity>`` (nats-server 2.15's
form): the first four fields are the source's *index name*
(``composeIName``: the stream name with hashed external API prefix and
consumer name, its filters and its transform destinations, each list joined
by form feeds), ``seq`` the origin sequence and ``identity`` the origin's
(``go_hash`` of its creation time in RFC 3339 with nanoseconds), so an
origin deleted and created again is told apart.  A feed recovers its
position from the newest such header after a restart, so the text must be
byte-identical to what nats-server writes and reads.

Copying also strips the per-publish headers that would mean something else
in the target (``Nats-Expected-*``, ``Nats-Batch-*``); a sourced message
loses an older ``Nats-Stream-Source`` and gets its own.  Pure: no I/O.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable

from cluster.model import StreamSource

__all__ = [
    "SOURCE_HEADER",
    "go_hash",
    "index_parts",
    "mirror_headers",
    "parse_rfc3339_ns",
    "rfc3339_ns",
    "source_header_of",
    "source_header_value",
    "sourced_headers",
    "stream_identity",
]

SOURCE_HEADER = "Nats-Stream-Source"
_HASH_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_STRIP_PREFIXES = (b"Nats-Expected-", b"Nats-Batch-")


def go_hash(text: str) -> str:
    """nats-server ``getHash``: 8 base-62 digits of SHA-256."""
    digest = hashlib.sha256(text.encode()).digest()
    return "".join(_HASH_DIGITS[b % 62] for b in digest[:8])


def rfc3339_ns(ts_ns: int) -> str:
    """RFC 3339 text (UTC, up to nanoseconds, trailing zeros cut) of Unix ns, as Go prints it."""
    secs, nanos = divmod(ts_ns, 1_000_000_000)
    dt = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=secs)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if nanos:
        text += "." + f"{nanos:09d}".rstrip("0")
    return text + "Z"


def stream_identity(created_ns: int) -> str:
    """A stream's identity as nats-server writes it in ``Nats-Stream-Source``:
    the hash of its creation time (RFC 3339, nanoseconds, UTC)."""
    return go_hash(rfc3339_ns(created_ns))


def parse_rfc3339_ns(text: str) -> int:
    """Unix ns of an RFC 3339 time with up to nanosecond precision.

    Raises:
        ValueError: not such a time.
    """
    frac = 0
    main = text
    tz = ""
    for i in range(len(text) - 1, 9, -1):
        if text[i] in "Zz+-":
            main, tz = text[:i], text[i:]
            break
    if "." in main:
        main, f = main.split(".", 1)
        if not f.isdigit() or len(f) > 9:
            raise ValueError(f"bad fraction in {text!r}")
        frac = int(f.ljust(9, "0"))
    offset = "+00:00" if tz in ("Z", "z") else tz
    dt = datetime.datetime.fromisoformat(main + offset)
    return int(dt.timestamp()) * 1_000_000_000 + frac


def index_parts(src: StreamSource) -> tuple[str, str, str]:
    """nats-server ``composeIName`` split in its three parts: stream (with
    the hashed API prefix for an external origin), filters, destinations."""
    name = src.name
    if src.external is not None:
        name += ":" + go_hash(src.external.api)
    if src.consumer is not None:
        name += ":C=" + go_hash(src.consumer.name)
    if not src.subject_transforms:
        return name, src.filter_subject or ">", ">"
    srcs = "\f".join(t.src or ">" for t in src.subject_transforms)
    dests = "\f".join(t.dest or ">" for t in src.subject_transforms)
    return name, srcs, dests


def source_header_value(src: StreamSource, seq: int, subject: str, identity: str) -> str:
    """The ``Nats-Stream-Source`` value nats-server 2.15 writes."""
    name, filters, dests = index_parts(src)
    out = f"{name} {seq} {filters} {dests} {subject}"
    return f"{out} {identity}" if identity else out


def source_header_maker(src: StreamSource, identity: str) -> Callable[[int, str], bytes]:
    """``source_header_value`` for one feed's batch: the parts that do not change per
    message (the hashed API prefix above all) computed once; returns
    ``(seq, subject) -> value`` as bytes."""
    name, filters, dests = index_parts(src)
    head = (name + " ").encode()
    mid = f" {filters} {dests} ".encode()
    tail = (" " + identity).encode() if identity else b""

    def make(seq: int, subject: str) -> bytes:
        return head + b"%d" % seq + mid + subject.encode() + tail

    return make


_PLAIN_SOURCED = b"NATS/1.0\r\n" + SOURCE_HEADER.encode() + b": "


def _strip(hdr: bytes, drop_source: bool) -> list[bytes]:
    """Header lines minus ``Nats-Expected-*``/``Nats-Batch-*`` (and
    ``Nats-Stream-Source``); the first (status) line is kept."""
    if not hdr:
        return []
    lines = hdr.split(b"\r\n")
    keep = [lines[0]]
    for line in lines[1:]:
        if not line:
            continue
        if line.startswith(_STRIP_PREFIXES):
            continue
        if drop_source and line.startswith(SOURCE_HEADER.encode() + b":"):
            continue
        keep.append(line)
    return keep


def mirror_headers(hdr: bytes) -> bytes | None:
    """A mirrored message's headers: ``Nats-Expected-*``/``Nats-Batch-*`` removed."""
    if not hdr or not any(p in hdr for p in _STRIP_PREFIXES):
        return hdr or None
    return b"\r\n".join(_strip(hdr, False)) + b"\r\n\r\n"


def sourced_headers(hdr: bytes, value: str | bytes) -> bytes:
    """A sourced message's headers: stripped, then ``Nats-Stream-Source: value`` appended."""
    v = value.encode() if isinstance(value, str) else value
    if not hdr:  # the common case: a message without headers
        return _PLAIN_SOURCED + v + b"\r\n\r\n"
    lines = _strip(hdr, True) or [b"NATS/1.0"]
    lines.append(SOURCE_HEADER.encode() + b": " + v)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def source_header_of(hdr: bytes) -> str | None:
    """The ``Nats-Stream-Source`` value in a header block, or None."""
    key = b"\r\n" + SOURCE_HEADER.encode() + b":"
    i = hdr.find(key)
    if i < 0:
        return None
    j = hdr.find(b"\r\n", i + len(key))
    return hdr[i + len(key) : j].decode("utf-8", "replace").strip()
