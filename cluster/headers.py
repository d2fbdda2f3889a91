"""A small, pure parser for NATS header blocks.

Theory of operation
-------------------
A NATS header block (``HPUB``/``HMSG``) looks like HTTP/1 headers::

    NATS/1.0[ <3-digit status>[ <description>]]\\r\\n
    Key: value\\r\\n
    Key: value2\\r\\n
    \\r\\n

Rules kept here, as nats-server applies them to JetStream headers
(reference §1.6):

* keys are **case-sensitive** (``nats-msg-id`` is not ``Nats-Msg-Id``);
* a key may repeat; values keep their order and ``get`` returns the first
  (nats-server's ``getHeader`` finds the first occurrence);
* ``Key:value`` with or without a space after the colon; values are trimmed
  of surrounding spaces and tabs;
* bytes are decoded as UTF-8 with ``surrogateescape`` so any byte string maps
  to a distinct ``str`` and back (``value.encode("utf-8", "surrogateescape")``).

``parse_headers(block)`` is strict: a malformed block raises
``HeaderParseError``.  ``parse_headers(block, strict=False)`` never raises: it
skips what it cannot read (a bad first line, a line without a colon, a missing
terminator), which is how nats-server's byte scanning treats such blocks; the
stream state machine uses that form so a client's odd header block can never
make ``apply`` fail.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["HEADER_LINE", "HeaderParseError", "Headers", "encode_headers", "parse_headers"]

HEADER_LINE = b"NATS/1.0"
"""The version line every header block starts with."""

_CRLF = b"\r\n"
_WS = " \t"


class HeaderParseError(ValueError):
    """A header block is malformed (strict parsing only)."""


@dataclass(frozen=True, slots=True)
class Headers:
    """A parsed header block.

    Attributes:
        status: The 3-digit status of a status line (``NATS/1.0 503``), else None.
        description: The rest of the status line (``"No Messages"``), else ``""``.
        fields: ``(key, value)`` pairs in block order; keys as written.
    """

    status: int | None = None
    description: str = ""
    fields: tuple[tuple[str, str], ...] = ()

    def get(self, key: str) -> str | None:
        """First value of ``key`` (case-sensitive), or None if absent."""
        for k, v in self.fields:
            if k == key:
                return v
        return None

    def get_all(self, key: str) -> list[str]:
        """Every value of ``key`` (case-sensitive), in order."""
        return [v for k, v in self.fields if k == key]

    def __contains__(self, key: object) -> bool:
        return any(k == key for k, _ in self.fields)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _status_line(line: bytes, strict: bool) -> tuple[int | None, str]:
    if not line.startswith(HEADER_LINE):
        if strict:
            raise HeaderParseError(f"header block must start with NATS/1.0, got {line[:16]!r}")
        return None, ""
    rest = line[len(HEADER_LINE) :]
    if not rest.strip(b" \t"):
        return None, ""
    if rest[:1] != b" ":
        if strict:
            raise HeaderParseError(f"bad header version line {line[:32]!r}")
        return None, ""
    rest = rest.lstrip(b" ")
    code, _, desc = rest.partition(b" ")
    if len(code) != 3 or not code.isdigit():
        if strict:
            raise HeaderParseError(f"bad status in header line {line[:32]!r}")
        return None, ""
    return int(code), _text(desc).strip(_WS)


def parse_headers(block: bytes, *, strict: bool = True) -> Headers:
    """Parse a raw header block.

    Args:
        block: The bytes from ``NATS/1.0`` through the blank line.
        strict: Raise on anything malformed (default); if False, skip it.

    Returns:
        The parsed ``Headers``.

    Raises:
        HeaderParseError: ``strict`` and the block is malformed: it does not
            start with ``NATS/1.0``, has a bad status, lacks the final
            ``\\r\\n\\r\\n``, or has a line without ``:`` or with an empty or
            space-containing key.
    """
    if strict and not block.endswith(b"\r\n\r\n"):
        raise HeaderParseError("header block must end with CRLF CRLF")
    lines = block.split(_CRLF)
    status, description = _status_line(lines[0], strict)
    fields: list[tuple[str, str]] = []
    body = lines[1:]
    if strict:
        # The split of "...\r\n\r\n" ends with two empty strings.
        body = body[:-2]
    for line in body:
        if not line:
            if strict:
                raise HeaderParseError("empty line inside header block")
            continue
        key, sep, value = line.partition(b":")
        if not sep or not key or any(c in key for c in b" \t") or key != key.strip():
            if strict:
                raise HeaderParseError(f"malformed header line {line[:32]!r}")
            continue
        fields.append((_text(key), _text(value).strip(_WS)))
    return Headers(status, description, tuple(fields))


def encode_headers(
    fields: Iterable[tuple[str, str]], *, status: int | None = None, description: str = ""
) -> bytes:
    """Build a header block (the inverse of ``parse_headers``).

    Args:
        fields: ``(key, value)`` pairs, written in order as ``Key: value``.
        status: Optional 3-digit status for the first line.
        description: Optional status description (needs ``status``).

    Raises:
        ValueError: a key is empty or contains ``:``, whitespace or CR/LF, a
            value contains CR/LF, or the status is not 3 digits.
    """
    first = HEADER_LINE
    if status is not None:
        if not 100 <= status <= 999:
            raise ValueError(f"status must be 3 digits, got {status}")
        first += b" %d" % status
        if description:
            first += b" " + description.encode("utf-8", "surrogateescape")
    elif description:
        raise ValueError("description needs a status")
    out = [first]
    for k, v in fields:
        if not k or any(c in k for c in ": \t\r\n"):
            raise ValueError(f"bad header key {k!r}")
        if "\r" in v or "\n" in v:
            raise ValueError(f"bad header value for {k!r}")
        out.append(
            k.encode("utf-8", "surrogateescape") + b": " + v.encode("utf-8", "surrogateescape")
        )
    return b"\r\n".join(out) + b"\r\n\r\n"
