"""Results, effects and nats-server's error values of the stream state machine.

Theory of operation
-------------------
``apply`` never raises for a client's mistake: it returns values.  A publish
answers ``PubResult`` or ``ApiErrorResult``; the other ops answer their own
result type.  Error values carry nats-server's HTTP-like ``code``, JetStream
``err_code`` and exact description (reference §3.11), so the API layer
serialises them without a lookup of its own.  Effects are data for the shell
(wake consumers, adjust to purges); nothing here performs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from store.errors import LimitExceeded

__all__ = [
    "ERR_DELETE_DENIED",
    "ERR_EXPECTED_STREAM",
    "ERR_HEADER_SIZE",
    "ERR_MSG_SIZE",
    "ERR_NO_MESSAGE",
    "ERR_PURGE_DENIED",
    "ERR_ROLLUP_DENIED",
    "ERR_SEALED",
    "ERR_SOURCE_HDR",
    "ERR_STORE_EOF",
    "ERR_TTL_DISABLED",
    "ERR_TTL_INVALID",
    "AckRemoveResult",
    "ApiErrorResult",
    "ApplyOutcome",
    "DeleteResult",
    "Effect",
    "ExpireResult",
    "NewMessages",
    "PolicyResult",
    "PubResult",
    "PurgeResult",
    "Purged",
    "Result",
    "Stored",
    "err_rollup_invalid",
    "err_store_failed",
    "err_wrong_last_msg_id",
    "err_wrong_last_seq",
    "go_quote",
]

# --------------------------------------------------------------------------- results


class PubResult(NamedTuple):
    """A publish was stored (or recognised as a duplicate of ``seq``).

    A named tuple rather than a frozen dataclass: one is built per stored
    message, and a tuple is built in C (a frozen dataclass's ``__init__``
    sets each field through ``object.__setattr__``).
    """

    stream: str
    seq: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class ApiErrorResult:
    """A client error, as nats-server's JetStream error JSON carries it."""

    code: int
    err_code: int
    description: str


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """Messages removed by a purge."""

    purged: int


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """A message was deleted (``{"success":true}``)."""

    seq: int


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """The policy was replaced; ``removed`` messages fell to the new limits."""

    removed: int


@dataclass(frozen=True, slots=True)
class ExpireResult:
    """Messages removed by ``max_age``."""

    removed: int


@dataclass(frozen=True, slots=True)
class AckRemoveResult:
    """Messages removed by retention (``AckRemove``), or 0 for ``Interest``."""

    removed: int


Result = (
    PubResult
    | ApiErrorResult
    | PurgeResult
    | DeleteResult
    | PolicyResult
    | ExpireResult
    | AckRemoveResult
)


@dataclass(frozen=True, slots=True)
class NewMessages:
    """Effect: messages up to ``last_seq`` were stored; wake consumers."""

    last_seq: int


@dataclass(frozen=True, slots=True)
class Purged:
    """Effect: a purge (or rollup) removed ``purged`` messages; the stream's
    first sequence is now ``first_seq``."""

    first_seq: int
    purged: int


@dataclass(frozen=True, slots=True)
class Stored:
    """Effect (only when the machine's ``report_stored`` is set, e.g. for a
    stream with ``republish``): one published message was stored.

    Attributes:
        seq: Its sequence.
        subject: Its stored subject.
        headers: Its header block (``b""`` if none).
        payload: Its body.
        ts_ns: Its timestamp.
        subject_last_seq: The subject's last live sequence before it was
            stored (0 if none): republish's ``Nats-Last-Sequence``.
    """

    seq: int
    subject: str
    headers: bytes
    payload: bytes
    ts_ns: int
    subject_last_seq: int


Effect = NewMessages | Purged | Stored


@dataclass(frozen=True, slots=True)
class ApplyOutcome:
    """What one applied entry produced.

    Attributes:
        results: One per publish of a ``StreamMsg`` (in order), else one.
        effects: Things the shell should do (data, never performed here).
    """

    results: tuple[Result, ...]
    effects: tuple[Effect, ...] = ()


# --------------------------------------------------------------------------- errors


def _err(code: int, err_code: int, description: str) -> ApiErrorResult:
    return ApiErrorResult(code, err_code, description)


ERR_SEALED = _err(400, 10109, "invalid operation on sealed stream")
ERR_EXPECTED_STREAM = _err(400, 10060, "expected stream does not match")
ERR_ROLLUP_DENIED = _err(500, 10111, "rollup not permitted")
ERR_TTL_INVALID = _err(400, 10165, "invalid per-message TTL")
ERR_TTL_DISABLED = _err(400, 10166, "per-message TTL is disabled")
ERR_HEADER_SIZE = _err(400, 10097, "header size exceeds maximum allowed of 64k")
ERR_MSG_SIZE = _err(400, 10054, "message size exceeds maximum allowed")
ERR_PURGE_DENIED = _err(500, 10110, "stream purge not permitted")
ERR_DELETE_DENIED = _err(500, 10057, "message delete not permitted")
ERR_NO_MESSAGE = _err(500, 10057, "no message found")
ERR_STORE_EOF = _err(500, 10057, "stream store EOF")
ERR_SOURCE_HDR = _err(400, 10227, "message stream source header is not allowed")


def err_wrong_last_seq(seq: int) -> ApiErrorResult:
    """400/10071 ``wrong last sequence: <seq>``."""
    return _err(400, 10071, f"wrong last sequence: {seq}")


def err_wrong_last_msg_id(msg_id: str) -> ApiErrorResult:
    """400/10070 ``wrong last msg ID: <id>``."""
    return _err(400, 10070, f"wrong last msg ID: {msg_id}")


def err_rollup_invalid(value: str) -> ApiErrorResult:
    """500/10111 ``rollup value invalid: "<value>"`` (Go ``%q`` quoting)."""
    return _err(500, 10111, f"rollup value invalid: {go_quote(value)}")


def err_store_failed(e: LimitExceeded) -> ApiErrorResult:
    """A store limit rejection: 400/10054 for size, else 503/10077."""
    if e.err_code == 10054:
        return ERR_MSG_SIZE
    return _err(503, e.err_code, e.description)


def go_quote(s: str) -> str:
    """Quote like Go's ``strconv.Quote`` (what ``%q`` prints) for common input."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif 0xD800 <= o <= 0xDFFF:  # an undecodable byte (surrogateescape)
            out.append(f"\\x{o - 0xDC00:02x}" if o >= 0xDC80 else "\\ufffd")
        elif not ch.isprintable():
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
