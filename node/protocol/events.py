"""Protocol events: one immutable value per NATS operation.

Events are ``NamedTuple``s: immutable like frozen dataclasses but cheap to
build, which matters because one is built per message on the hot path.
Subjects, reply subjects, sids and queue names are ``bytes`` exactly as they
appear on the wire; ``headers`` is the raw header block (``NATS/1.0...\\r\\n\\r\\n``).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Info(NamedTuple):
    """INFO: server (or route peer) information, the decoded JSON object."""

    fields: dict[str, Any]


class Connect(NamedTuple):
    """CONNECT: the client's (or route's) options, the decoded JSON object."""

    fields: dict[str, Any]


class Pub(NamedTuple):
    """PUB <subject> [reply] <size>."""

    subject: bytes
    reply: bytes | None
    payload: bytes


class HPub(NamedTuple):
    """HPUB <subject> [reply] <hdr size> <total size>."""

    subject: bytes
    reply: bytes | None
    headers: bytes
    payload: bytes


class Sub(NamedTuple):
    """SUB <subject> [queue] <sid>."""

    subject: bytes
    queue: bytes | None
    sid: bytes


class Unsub(NamedTuple):
    """UNSUB <sid> [max_msgs]."""

    sid: bytes
    max_msgs: int | None


class Msg(NamedTuple):
    """MSG <subject> <sid> [reply] <size> (server to client)."""

    subject: bytes
    sid: bytes
    reply: bytes | None
    payload: bytes


class HMsg(NamedTuple):
    """HMSG <subject> <sid> [reply] <hdr size> <total size> (server to client)."""

    subject: bytes
    sid: bytes
    reply: bytes | None
    headers: bytes
    payload: bytes


class Ping(NamedTuple):
    """PING."""


class Pong(NamedTuple):
    """PONG."""


class Ok(NamedTuple):
    """+OK."""


class Err(NamedTuple):
    """-ERR '<text>' (``text`` without the quotes)."""

    text: str


class RSub(NamedTuple):
    """RS+ <account> <subject> [<queue> <weight>] (route interest added)."""

    account: bytes
    subject: bytes
    queue: bytes | None
    weight: int
    #: a route's ``LS+ <origin> ...``: the leaf cluster the interest comes from
    origin: bytes = b""


ANY_ORIGIN = b"\x00any"
"""``RUnsub.origin`` of a route peer's ``LS-`` without its leaf cluster (a peer that did not
announce ``lnocu``): the interest of whichever of its leaf clusters has it."""


class RUnsub(NamedTuple):
    """RS- <account> <subject> [<queue>] (route interest removed)."""

    account: bytes
    subject: bytes
    queue: bytes | None
    origin: bytes = b""


class RMsg(NamedTuple):
    """RMSG/HMSG from a route: ``queues`` are the groups it is meant for.

    ``headers`` is None for RMSG and the header block for a route HMSG.
    """

    account: bytes
    subject: bytes
    reply: bytes | None
    queues: tuple[bytes, ...]
    headers: bytes | None
    payload: bytes
    #: a route's ``LMSG <origin> ...``: the leaf cluster the message comes from
    origin: bytes = b""


PING = Ping()
PONG = Pong()
OK = Ok()

Event = (
    Info
    | Connect
    | Pub
    | HPub
    | Sub
    | Unsub
    | Msg
    | HMsg
    | Ping
    | Pong
    | Ok
    | Err
    | RSub
    | RUnsub
    | RMsg
)
