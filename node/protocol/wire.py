"""Serialisation of NATS protocol operations: the bytes the server (and the
test clients) write, exactly as nats-server writes them.  The parser is in
``connection.py``."""

from __future__ import annotations

import json
from typing import Any

from node.protocol.events import (
    OK,
    PING,
    PONG,
    Connect,
    Err,
    Event,
    HMsg,
    HPub,
    Info,
    Msg,
    Pub,
    RMsg,
    RSub,
    RUnsub,
    Sub,
    Unsub,
)

CRLF = b"\r\n"
PING_BYTES = b"PING\r\n"
PONG_BYTES = b"PONG\r\n"
OK_BYTES = b"+OK\r\n"


def info_bytes(fields: dict[str, Any]) -> bytes:
    """``INFO {...} \\r\\n`` exactly as nats-server writes it (note the space)."""
    return b"INFO " + json.dumps(fields, separators=(",", ":")).encode() + b" \r\n"


def err_bytes(text: str) -> bytes:
    """``-ERR '<text>'\\r\\n``."""
    return b"-ERR '" + text.encode() + b"'\r\n"


def msg_bytes(subject: bytes, sid: bytes, reply: bytes | None, payload: bytes) -> bytes:
    """A MSG op with its payload."""
    mid = b" " + reply + b" " if reply else b" "
    return b"".join(
        (b"MSG ", subject, b" ", sid, mid, str(len(payload)).encode(), CRLF, payload, CRLF)
    )


def hmsg_bytes(
    subject: bytes, sid: bytes, reply: bytes | None, headers: bytes, payload: bytes
) -> bytes:
    """An HMSG op with its header block and payload."""
    mid = b" " + reply + b" " if reply else b" "
    hl = len(headers)
    return b"".join(
        (
            b"HMSG ",
            subject,
            b" ",
            sid,
            mid,
            str(hl).encode(),
            b" ",
            str(hl + len(payload)).encode(),
            CRLF,
            headers,
            payload,
            CRLF,
        )
    )


def serialize(event: Event) -> bytes:
    """Bytes for any event (slow path; the router builds MSG bytes itself)."""
    t = type(event)
    if t is Msg:
        assert isinstance(event, Msg)
        return msg_bytes(event.subject, event.sid, event.reply, event.payload)
    if t is HMsg:
        assert isinstance(event, HMsg)
        return hmsg_bytes(event.subject, event.sid, event.reply, event.headers, event.payload)
    if t is Info:
        assert isinstance(event, Info)
        return info_bytes(event.fields)
    if t is Connect:
        assert isinstance(event, Connect)
        return b"CONNECT " + json.dumps(event.fields, separators=(",", ":")).encode() + CRLF
    if t is Pub:
        assert isinstance(event, Pub)
        mid = b" " + event.reply + b" " if event.reply else b" "
        return (
            b"PUB "
            + event.subject
            + mid
            + str(len(event.payload)).encode()
            + CRLF
            + event.payload
            + CRLF
        )
    if t is HPub:
        assert isinstance(event, HPub)
        mid = b" " + event.reply + b" " if event.reply else b" "
        hl = len(event.headers)
        tot = hl + len(event.payload)
        return (
            b"HPUB "
            + event.subject
            + mid
            + b"%d %d\r\n" % (hl, tot)
            + event.headers
            + event.payload
            + CRLF
        )
    if t is Sub:
        assert isinstance(event, Sub)
        q = b" " + event.queue if event.queue else b""
        return b"SUB " + event.subject + q + b" " + event.sid + CRLF
    if t is Unsub:
        assert isinstance(event, Unsub)
        mx = b" %d" % event.max_msgs if event.max_msgs is not None else b""
        return b"UNSUB " + event.sid + mx + CRLF
    if t is type(PING):
        return PING_BYTES
    if t is type(PONG):
        return PONG_BYTES
    if t is type(OK):
        return OK_BYTES
    if t is Err:
        assert isinstance(event, Err)
        return err_bytes(event.text)
    if t is RSub:
        assert isinstance(event, RSub)
        if event.queue is None:
            return b"RS+ " + event.account + b" " + event.subject + CRLF
        return b"RS+ %s %s %s %d\r\n" % (event.account, event.subject, event.queue, event.weight)
    if t is RUnsub:
        assert isinstance(event, RUnsub)
        q = b" " + event.queue if event.queue else b""
        return b"RS- " + event.account + b" " + event.subject + q + CRLF
    if t is RMsg:
        assert isinstance(event, RMsg)
        return rmsg_bytes(event)
    raise TypeError(f"cannot serialize {event!r}")


def rmsg_bytes(ev: RMsg) -> bytes:
    """An RMSG (or route HMSG when ``ev.headers`` is not None)."""
    parts = [ev.account, ev.subject]
    if ev.queues:
        if ev.reply:
            parts += [b"+", ev.reply]
        else:
            parts.append(b"|")
        parts.extend(ev.queues)
    elif ev.reply:
        parts.append(ev.reply)
    if ev.headers is None:
        parts.append(str(len(ev.payload)).encode())
        return b"RMSG " + b" ".join(parts) + CRLF + ev.payload + CRLF
    hl = len(ev.headers)
    parts += [str(hl).encode(), str(hl + len(ev.payload)).encode()]
    return b"HMSG " + b" ".join(parts) + CRLF + ev.headers + ev.payload + CRLF
