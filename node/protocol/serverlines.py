"""The control lines of server links: routes (``RMSG``/``HMSG``, ``RS+``/``RS-``, a
route's leaf-origin ``LMSG``/``LS+``/``LS-``) and leaf connections (``LMSG``/``HMSG``,
``LS+``/``LS-`` without an account).

Pure functions of one line, called by ``ProtocolConnection._control`` for the
``ROUTE`` and ``LEAF`` roles; a message line becomes the pending payload op
``(K_RMSG, total, account, subject, reply, queues, hsize, origin)`` that the
connection completes with the payload (``hsize`` -1: no headers).
"""

from __future__ import annotations

from typing import Any

from node.protocol.events import ANY_ORIGIN, OK, Connect, Err, Event, Info, RSub, RUnsub
from node.protocol.lines import (
    ERR_MAX_PAYLOAD,
    ERR_UNKNOWN_OP,
    ProtocolViolation,
    err_text,
    json_event,
    split_args,
)

K_RMSG = 4
"""The pending-op kind of a server link's message (``connection._K_RMSG``)."""


def route_line(
    verb: bytes, rest: bytes, is_route: bool, ls_minus_origin: bool, max_payload: int
) -> Event | ProtocolViolation | tuple[Any, ...] | None:
    """A cluster peer's ops (``RMSG``/``HMSG``, ``RS+``/``RS-``, and on a route the
    leaf-origin ``LMSG``/``LS+``/``LS-``), and the lines every server link shares."""
    if verb == b"RMSG" or verb == b"HMSG":
        return rmsg_args(split_args(rest), verb == b"HMSG", max_payload)
    if is_route and verb in (b"LMSG", b"LS+", b"LS-"):
        return _route_origin_line(verb, split_args(rest), ls_minus_origin, max_payload)
    if verb == b"RS+":
        args = split_args(rest)
        if len(args) == 2:
            return RSub(args[0], args[1], None, 0)
        if len(args) in (3, 4):
            w = args[3] if len(args) == 4 else b"1"
            return RSub(args[0], args[1], args[2], int(w) if w.isdigit() else 1)
        return ProtocolViolation(None, "RS+ arguments")
    if verb == b"RS-":
        args = split_args(rest)
        if len(args) in (2, 3):
            return RUnsub(args[0], args[1], args[2] if len(args) == 3 else None)
        return ProtocolViolation(None, "RS- arguments")
    if verb == b"INFO":
        return json_event(Info, rest)
    if verb == b"CONNECT":
        return json_event(Connect, rest)
    if verb == b"+OK":
        return OK
    if verb == b"-ERR":
        return Err(err_text(rest))
    return ProtocolViolation(ERR_UNKNOWN_OP, "unknown verb")


def _route_origin_line(
    verb: bytes, args: list[bytes], ls_minus_origin: bool, max_payload: int
) -> Event | ProtocolViolation | tuple[Any, ...]:
    """A route's leaf-origin ops (nats-server's ``lnoc``): ``LS+ <origin> <account>
    <subject> [<queue> <weight>]``, ``LS- <origin> <account> <subject> [<queue>]`` and
    ``LMSG <origin> <account> <subject> [reply | + reply queues | | queues] <hdr>
    <total>`` (always two sizes)."""
    if len(args) < 2:
        return ProtocolViolation(None, f"{verb.decode()} arguments")
    if verb == b"LS-" and not ls_minus_origin:
        if len(args) in (2, 3):
            return RUnsub(args[0], args[1], args[2] if len(args) == 3 else None, ANY_ORIGIN)
        return ProtocolViolation(None, "LS- arguments")
    origin = args[0]
    if verb == b"LMSG":
        return rmsg_args(args[1:], True, max_payload, origin)
    rest = args[1:]
    if verb == b"LS+":
        if len(rest) == 2:
            return RSub(rest[0], rest[1], None, 0, origin)
        if len(rest) in (3, 4):
            w = rest[3] if len(rest) == 4 else b"1"
            return RSub(rest[0], rest[1], rest[2], int(w) if w.isdigit() else 1, origin)
        return ProtocolViolation(None, "LS+ arguments")
    if len(rest) in (2, 3):
        return RUnsub(rest[0], rest[1], rest[2] if len(rest) == 3 else None, origin)
    return ProtocolViolation(None, "LS- arguments")


def leaf_line(
    verb: bytes, rest: bytes, ls_minus_origin: bool, max_payload: int
) -> Event | ProtocolViolation | tuple[Any, ...] | None:
    """A leaf connection's ops: ``LS+ subject [queue weight]``, ``LS- subject
    [queue]``, ``LMSG``/``HMSG subject [reply | + reply queues | | queues] size(s)``
    (no account: the link is bound to one); events carry account ``b""``."""
    if verb == b"LMSG" or verb == b"HMSG":
        return rmsg_args([b"", *split_args(rest)], verb == b"HMSG", max_payload)
    if verb == b"LS+":
        args = split_args(rest)
        if len(args) == 1:
            return RSub(b"", args[0], None, 0)
        if len(args) in (2, 3):
            w = args[2] if len(args) == 3 else b"1"
            return RSub(b"", args[0], args[1], int(w) if w.isdigit() else 1)
        return ProtocolViolation(None, "LS+ arguments")
    if verb == b"LS-":
        args = split_args(rest)
        if len(args) in (1, 2):
            return RUnsub(b"", args[0], args[1] if len(args) == 2 else None)
        return ProtocolViolation(None, "LS- arguments")
    return route_line(verb, rest, False, ls_minus_origin, max_payload)


def rmsg_args(
    args: list[bytes], has_headers: bool, max_payload: int, origin: bytes = b""
) -> tuple[Any, ...] | ProtocolViolation:
    """The arguments of ``RMSG``/``HMSG``/``LMSG``: ``account subject [reply | + reply
    queues | | queues] size(s)`` -> the pending payload op (``K_RMSG``)."""
    nsizes = 2 if has_headers else 1
    if len(args) < 2 + nsizes or not all(a.isdigit() for a in args[-nsizes:]):
        return ProtocolViolation(None, "RMSG arguments")
    account, subject = args[0], args[1]
    middle = args[2:-nsizes]
    reply: bytes | None = None
    queues: tuple[bytes, ...] = ()
    if middle:
        if middle[0] == b"+" and len(middle) >= 2:
            reply = middle[1]
            queues = tuple(middle[2:])
        elif middle[0] == b"|":
            queues = tuple(middle[1:])
        elif len(middle) == 1:
            reply = middle[0]
        else:
            return ProtocolViolation(None, "RMSG arguments")
    if has_headers:
        hsize, total = int(args[-2]), int(args[-1])
        if hsize > total:
            return ProtocolViolation(None, "HMSG sizes")
    else:
        hsize, total = -1, int(args[-1])
    if total > max_payload:
        return ProtocolViolation(ERR_MAX_PAYLOAD, "payload size")
    return (K_RMSG, total, account, subject, reply, queues, hsize, origin)
