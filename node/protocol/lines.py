"""Control-line pieces of the NATS protocol parser (``connection``): the fatal-error
event, argument splitting as nats-server splits, and the JSON of CONNECT/INFO."""

from __future__ import annotations

from typing import Any, NamedTuple

from node.protocol.boundedjson import loads as bounded_loads
from node.protocol.events import Connect, Event

ERR_UNKNOWN_OP = "Unknown Protocol Operation"
ERR_MAX_PAYLOAD = "Maximum Payload Violation"
ERR_MAX_CONTROL_LINE = "maximum control line exceeded"
# nats-server's parseSize rejects sizes of more than 9 digits as invalid (not oversize)
SIZE_DIGITS_MAX = 9


class ProtocolViolation(NamedTuple):
    """Fatal input: send ``-ERR '<err>'`` when ``err`` is not None, then close."""

    err: str | None
    detail: str


def split_args(b: bytes) -> list[bytes]:
    """Split arguments on spaces and tabs only, as nats-server does (``bytes.split()``
    would also split on CR, VT and FF, turning ``0\\r`` into a valid size)."""
    if b"\r" in b or b"\x0b" in b or b"\x0c" in b:
        return [a for a in b.replace(b"\t", b" ").split(b" ") if a]
    return b.split()


def split_verb(line: bytes) -> list[bytes]:
    """``line.split(None, 1)`` but only spaces and tabs separate the verb."""
    if b"\r" in line or b"\x0b" in line or b"\x0c" in line:
        parts = line.replace(b"\t", b" ").split(b" ", 1)
        if len(parts) == 2:
            parts[1] = parts[1].lstrip(b" \t")
            if not parts[1]:
                parts.pop()
        return [p for p in parts if p] if parts[0] else []
    return line.split(None, 1)


def missing_args(line: bytes) -> ProtocolViolation:
    # "SUB\r\n": the verb with no separator at all is an unknown op;
    # "SUB \r\n" (separator, no args) closes silently, as nats-server does.
    if line.rstrip(b" \t") == line:
        return ProtocolViolation(ERR_UNKNOWN_OP, "missing arguments")
    return ProtocolViolation(None, "missing arguments")


def without_nulls(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose ``null`` members are left out: Go's Unmarshal leaves a
    field as it was on null, even one an earlier duplicate key just set."""
    return {k: v for k, v in pairs if v is not None}


def json_event(cls: Any, rest: bytes) -> Event | ProtocolViolation:
    # Go's decoder takes invalid UTF-8 inside strings (as U+FFFD); anywhere
    # else the replacement character is a syntax error there and here too
    try:
        obj = bounded_loads(rest, object_pairs_hook=without_nulls if cls is Connect else None)
    except ValueError:
        return ProtocolViolation(None, "bad JSON")
    if not isinstance(obj, dict):
        return ProtocolViolation(None, "JSON is not an object")
    ev: Event = cls(obj)
    return ev


def err_text(rest: bytes) -> str:
    text = rest.decode("utf-8", "replace").strip()
    if len(text) >= 2 and text[0] == "'" and text[-1] == "'":
        text = text[1:-1]
    return text
