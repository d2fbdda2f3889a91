"""The NATS protocol as a sans-IO state machine (h11-shaped).

Theory of operation: a ``ProtocolConnection`` is fed raw bytes with
``receive_data`` and returns every complete operation in them as events (see
``events.py``), parsing the whole chunk before returning — the session then
acts on the batch.  A control line ends at ``\\n`` (a preceding ``\\r`` is
dropped); a payload of the declared size must be followed by exactly
``\\r\\n``.  Partial input is kept (bounded by ``max_control_line`` for lines
and by ``max_payload`` for payloads) and resumed on the next call, so feeding
one byte at a time yields the same events as feeding everything at once.

Errors follow nats-server (observed on 2.15.1): a bad verb, an op missing its
arguments, or a payload overrun produce ``-ERR 'Unknown Protocol Operation'``
and close; wrong argument counts or sizes and bad CONNECT JSON close without an
``-ERR``; an oversize payload is ``'Maximum Payload Violation'``; an overlong
control line is ``'maximum control line exceeded'``.  A fatal error is
reported as a final ``ProtocolViolation`` event, after which the connection
accepts nothing.  Semantic checks that leave the connection open (invalid
subjects, permissions) belong to the session, not here.

Roles: ``SERVER`` parses what a client sends, ``CLIENT`` parses what a server
sends, ``ROUTE`` parses what a cluster peer sends.  Serialisation helpers at the
bottom build the bytes the server writes.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from typing import Any

from node.protocol.bulk import (
    MIXED_BULK_SIZE_DIGITS_MAX,
    MIXED_WINDOW,
    REPLY_BULK_MIN_BYTES,
    mixed_bulk,
    reply_bulk,
)
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
    Sub,
    Unsub,
)
from node.protocol.lines import (
    ERR_MAX_CONTROL_LINE,
    ERR_MAX_PAYLOAD,
    ERR_UNKNOWN_OP,
    SIZE_DIGITS_MAX,
    ProtocolViolation,
    err_text,
    json_event,
    missing_args,
    split_args,
    split_verb,
)
from node.protocol.pubruns import MANY_PAYLOAD_MAX, hand_mixed, hand_run, many_subjects
from node.protocol.serverlines import K_RMSG, leaf_line, route_line


class Role(enum.Enum):
    SERVER = "server"
    CLIENT = "client"
    ROUTE = "route"
    LEAF = "leaf"


# per role, the line the fast path recognises (see ``_fast_runs``)
_FAST_LINE: dict[Role, Callable[[bytes, int], re.Match[bytes] | None]] = {}


# A well-formed PUB line: subject, optional reply, size (at most 9 digits),
# single or repeated spaces/tabs, CRLF.  Anything else takes the careful path.
_PUB_LINE = re.compile(rb"PUB[ \t]+([^ \t\r\n]+)[ \t]+(?:([^ \t\r\n]+)[ \t]+)?(\d{1,9})\r\n")

# A plain route RMSG line in the $G account, without queue groups: subject,
# optional reply (never a lone "+" or "|", which introduce queues), size.
_RMSG_LINE = re.compile(
    rb"RMSG[ \t]+\$G[ \t]+([^ \t\r\n]+)[ \t]+"
    rb"(?:(?![+|][ \t])([^ \t\r\n]+)[ \t]+)?(\d{1,9})\r\n"
)

# A plain leaf LMSG line, without queue groups: subject, optional reply, size.
_LMSG_LINE = re.compile(
    rb"LMSG[ \t]+([^ \t\r\n]+)[ \t]+(?:(?![+|][ \t])([^ \t\r\n]+)[ \t]+)?(\d{1,9})\r\n"
)

# A well-formed HPUB line: subject, optional reply, header size, total size.
_HPUB_LINE = re.compile(
    rb"HPUB[ \t]+([^ \t\r\n]+)[ \t]+(?:([^ \t\r\n]+)[ \t]+)?(\d{1,9})[ \t]+(\d{1,9})\r\n"
).match

_FAST_LINE[Role.SERVER] = _PUB_LINE.match
_FAST_LINE[Role.ROUTE] = _RMSG_LINE.match
_FAST_LINE[Role.LEAF] = _LMSG_LINE.match

# kinds of pending payload ops
_K_PUB, _K_HPUB, _K_MSG, _K_HMSG = range(4)
_K_RMSG = K_RMSG


class ProtocolConnection:
    """Parser for one connection's inbound byte stream.

    Args:
        role: which side's input is parsed.
        max_payload: largest payload (HPUB: headers + payload) accepted.
        max_control_line: longest control line accepted, in bytes.
        headers: whether HPUB is allowed (a client enables it in CONNECT).
    """

    __slots__ = (
        "_buf",
        "_dead",
        "_fast_match",
        "_parts",
        "_parts_len",
        "_pend",
        "_server",
        "headers",
        "ls_minus_origin",
        "max_control_line",
        "max_payload",
        "role",
    )

    def __init__(
        self,
        role: Role,
        *,
        max_payload: int = 1048576,
        max_control_line: int = 4096,
        headers: bool = False,
    ) -> None:
        self.role = role
        # per-feed constants (an Enum's hash is a Python call)
        self._server = role is Role.SERVER
        self._fast_match = _FAST_LINE.get(role)
        #: a route peer's ``LS-`` names its leaf cluster (it announced ``lnocu``); else it
        #: is ``LS- <account> <subject> [<queue>]`` and the event's origin is ``ANY_ORIGIN``
        self.ls_minus_origin = True
        self.max_payload = max_payload
        self.max_control_line = max_control_line
        self.headers = headers
        self._buf = b""
        self._pend: tuple[Any, ...] | None = None
        self._parts: list[bytes] = []
        self._parts_len = 0
        self._dead = False

    @property
    def dead(self) -> bool:
        """True once a fatal error was reported."""
        return self._dead

    def buffered_bytes(self) -> int:
        """Bytes held waiting for the rest of an operation."""
        return len(self._buf) + self._parts_len

    def receive_data(self, data: bytes) -> list[Event | ProtocolViolation]:
        """Feed bytes; return every operation they complete, in order.

        Returns:
            Events for each complete operation; if the input is fatally bad,
            the list ends with a ``ProtocolViolation`` and later calls
            return ``[]``.
        """
        out: list[Event | ProtocolViolation] = []
        append = out.append

        if self.role is Role.ROUTE or self.role is Role.LEAF:
            account = b"$G" if self.role is Role.ROUTE else b""

            def on_pub(subject: bytes, reply: bytes | None, payload: bytes) -> None:
                append(RMsg(account, subject, reply, (), None, payload))

        else:

            def on_pub(subject: bytes, reply: bytes | None, payload: bytes) -> None:
                append(Pub(subject, reply, payload))

        self.feed(data, on_pub, append)
        return out

    def halt(self) -> None:
        """Stop parsing (the connection is closing); later input is ignored."""
        self._dead = True

    def feed(
        self,
        data: bytes,
        on_pub: Callable[[bytes, bytes | None, bytes], object],
        on_event: Callable[[Event | ProtocolViolation], object],
        on_pub_run: Callable[[bytes, list[bytes | None], list[bytes]], object] | None = None,
        on_pubs: Callable[[list[bytes], bytes], object] | None = None,
        on_mixed: Callable[[list[bytes], list[bytes]], object] | None = None,
    ) -> None:
        """Feed bytes; call back for every operation they complete, in order.

        The hot-path form of ``receive_data``: a client's PUB (server role),
        or a plain route RMSG in the ``$G`` account without queues (route
        role), is handed to ``on_pub(subject, reply, payload)`` without
        building an event; every other operation goes to ``on_event``.  With
        ``on_pub_run``, consecutive such messages to one subject arrive as one
        call ``on_pub_run(subject, replies, payloads)`` (a run of one still
        goes to ``on_pub``; the lists are reused after the call returns, so
        the callback must not keep them); order across subjects and other
        operations is kept, and ``halt()`` is noticed between runs.  With
        ``on_pubs`` (server role), consecutive PUBs without a reply that carry
        one small payload (at most ``MANY_PAYLOAD_MAX`` bytes) to differing
        subjects — a client's JetStream acks — arrive as one call
        ``on_pubs(subjects, payload)`` (at least two; the list is the
        callback's to keep).  With ``on_mixed`` (server role, with
        ``on_pub_run``), consecutive reply-less PUBs each to a subject other than
        the next one's arrive as one call ``on_mixed(subjects, payloads)`` (the
        lists are reused after the call returns).  A callback may call ``halt()``;
        parsing stops right after it.  A fatal error is reported to
        ``on_event`` as a ``ProtocolViolation``, after which nothing more is
        parsed, ever.
        """
        if self._dead:
            return
        if self._pend is not None:
            # waiting for a payload: collect chunks without re-joining each time
            self._parts.append(data)
            self._parts_len += len(data)
            if self._parts_len < self._pend[1] + 1:
                return
            buf = b"".join(self._parts)
            self._parts = []
            self._parts_len = 0
        else:
            buf = self._buf + data if self._buf else data
        n = len(buf)
        pos = 0
        pend = self._pend
        mcl = self.max_control_line
        max_payload = self.max_payload
        server = self._server
        fast_match = self._fast_match
        while pos < n:
            if pend is not None:
                end = pos + pend[1]
                if n < end + 2:
                    if n > end and buf[end] != 13:
                        return self._fail(on_event, ERR_UNKNOWN_OP, "payload not followed by CRLF")
                    break
                if buf[end : end + 2] != b"\r\n":
                    return self._fail(on_event, ERR_UNKNOWN_OP, "payload not followed by CRLF")
                kind = pend[0]
                if kind == _K_PUB:
                    on_pub(pend[2], pend[3], buf[pos:end])
                else:
                    on_event(self._payload_event(pend, buf[pos:end]))
                pos = end + 2
                pend = None
                if self._dead:
                    return
                continue
            if fast_match is not None and (m := fast_match(buf, pos)) is not None:
                start = m.end()
                end = start + int(m.group(3))
                if (
                    end + 2 == n
                    and buf[end] == 13
                    and buf[end + 1] == 10
                    and end - start <= max_payload
                    and start - pos <= mcl + 2
                ):
                    # the chunk is this one op (a request, an answer): no run lists
                    on_pub(m.group(1), m.group(2), buf[start:end])
                    pos = n
                    if self._dead:
                        return
                    break
                # fastest path: well-formed PUB (or plain RMSG) lines
                pos = self._fast_runs(buf, pos, fast_match, on_pub, on_pub_run, on_pubs, on_mixed)
                if self._dead:
                    return
                if pos >= n:
                    break
            if server:
                # fast path: a client's PUB
                if buf.startswith(b"PUB ", pos):
                    nl = buf.find(b"\n", pos)
                    if nl < 0:
                        if n - pos > mcl:
                            return self._fail(on_event, ERR_MAX_CONTROL_LINE, "control line")
                        break
                    end_line = nl - 1 if buf[nl - 1] == 13 else nl
                    if end_line - pos > mcl:
                        return self._fail(on_event, ERR_MAX_CONTROL_LINE, "control line")
                    args = split_args(buf[pos + 4 : end_line])
                    na = len(args)
                    if na == 2:
                        size_tok = args[1]
                        reply = None
                    elif na == 3:
                        size_tok = args[2]
                        reply = args[1]
                    else:
                        return self._fail(on_event, None, "PUB arguments")
                    if not size_tok.isdigit() or len(size_tok) > SIZE_DIGITS_MAX:
                        return self._fail(on_event, None, "PUB size")
                    size = int(size_tok)
                    if size > max_payload:
                        return self._fail(on_event, ERR_MAX_PAYLOAD, "payload size")
                    pos = nl + 1
                    end = pos + size
                    if n >= end + 2:
                        if buf[end : end + 2] != b"\r\n":
                            return self._fail(
                                on_event, ERR_UNKNOWN_OP, "payload not followed by CRLF"
                            )
                        on_pub(args[0], reply, buf[pos:end])
                        pos = end + 2
                        if self._dead:
                            return
                    else:
                        if n > end and buf[end] != 13:
                            return self._fail(
                                on_event, ERR_UNKNOWN_OP, "payload not followed by CRLF"
                            )
                        pend = (_K_PUB, size, args[0], reply)
                    continue
                # fast path: a client's complete, well-formed HPUB (a publish with a
                # Nats-Msg-Id): one regex match, no verb dispatch or pending state;
                # anything else (incomplete, malformed, too large) takes the general path
                if self.headers and buf.startswith(b"HPUB ", pos):
                    m = _HPUB_LINE(buf, pos)
                    if m is not None and m.end() - pos <= mcl + 2:
                        start = m.end()
                        hsize, total = int(m.group(3)), int(m.group(4))
                        end = start + total
                        if (
                            hsize <= total <= max_payload
                            and n >= end + 2
                            and buf[end] == 13
                            and buf[end + 1] == 10
                        ):
                            h = start + hsize
                            on_event(HPub(m.group(1), m.group(2), buf[start:h], buf[h:end]))
                            pos = end + 2
                            if self._dead:
                                return
                            continue
            # anything else (incomplete, queues, errors): the general path
            nl = buf.find(b"\n", pos)
            if nl < 0:
                if n - pos > mcl:
                    return self._fail(on_event, ERR_MAX_CONTROL_LINE, "control line")
                break
            end_line = nl - 1 if nl > pos and buf[nl - 1] == 13 else nl
            if end_line - pos > mcl:
                return self._fail(on_event, ERR_MAX_CONTROL_LINE, "control line")
            line = buf[pos:end_line]
            pos = nl + 1
            res = self._control(line)
            if res is None:
                continue
            if type(res) is tuple:
                pend = res
                continue
            if type(res) is ProtocolViolation:
                return self._fail(on_event, res.err, res.detail)
            on_event(res)  # type: ignore[arg-type]
            if self._dead:
                return
        self._pend = pend
        rest = buf[pos:] if pos < n else b""
        if pend is not None:
            self._parts = [rest]
            self._parts_len = len(rest)
            self._buf = b""
        else:
            self._buf = rest

    def _fast_runs(
        self,
        buf: bytes,
        pos: int,
        match: Callable[[bytes, int], re.Match[bytes] | None],
        on_pub: Callable[[bytes, bytes | None, bytes], object],
        on_pub_run: Callable[[bytes, list[bytes | None], list[bytes]], object] | None,
        on_pubs: Callable[[list[bytes], bytes], object] | None = None,
        on_mixed: Callable[[list[bytes], list[bytes]], object] | None = None,
    ) -> int:
        """Consume complete well-formed messages from ``pos``; return the new position.

        Each line is one regex match (subject, reply, size), and the same line
        repeated (same subject, reply and size: the common publisher) is
        recognised with ``startswith`` alone.  Consecutive messages to one
        subject are handed over as a run when ``on_pub_run`` is given, and
        runs of reply-less small messages to differing subjects (acks) with
        two regex calls to ``on_pubs`` when given; a run to one subject with a
        reply per message (a JetStream publisher's window) is taken with two
        regex calls per window (``bulk.reply_bulk``).  Anything incomplete or
        unusual is left for the careful path.
        """
        n = len(buf)
        limit = self.max_control_line + 2
        max_payload = self.max_payload
        run_subject = b""
        replies: list[bytes | None] = []
        payloads: list[bytes] = []
        # reply-less singles to changing subjects, handed over together
        mixed_s: list[bytes] = []
        mixed_p: list[bytes] = []
        bulk_replies = on_pub_run is not None and self.role is Role.SERVER
        m = match(buf, pos)
        while m is not None:
            start = m.end()
            subject, reply, size_tok = m.groups()
            size = int(size_tok)
            end = start + size
            if (
                end + 2 > n
                or buf[end] != 13
                or buf[end + 1] != 10
                or size > max_payload
                or start - pos > limit
            ):
                break
            if on_pub_run is None:
                on_pub(subject, reply, buf[start:end])
                pos = end + 2
                if self._dead:
                    return pos
            else:
                if (
                    on_pubs is not None
                    and reply is None
                    and size <= MANY_PAYLOAD_MAX
                    and not buf.startswith(buf[pos:start], end + 2)
                ):
                    # reply-less small messages to differing subjects (acks):
                    # the whole run with one split
                    payload = buf[start:end]
                    subjects = many_subjects(buf, pos, payload, limit - 7 - len(size_tok))
                    if subjects is not None:
                        if mixed_s:
                            hand_mixed(on_mixed, mixed_s, mixed_p)
                            if self._dead:
                                return pos
                        if payloads:
                            hand_run(on_pub, on_pub_run, run_subject, replies, payloads)
                            run_subject = b""
                            if self._dead:
                                return pos
                        pos += len(subjects) * (len(payload) + 9 + len(size_tok))
                        pos += sum(map(len, subjects))
                        on_pubs(subjects, payload)
                        if self._dead:
                            return pos
                        m = match(buf, pos)
                        continue
                line = buf[pos:start]
                if (
                    on_mixed is not None
                    and reply is None
                    and subject != run_subject
                    and not buf.startswith(line, end + 2)
                ):
                    # a single to its subject (the next op differs): batched
                    if payloads:
                        hand_run(on_pub, on_pub_run, run_subject, replies, payloads)
                        run_subject = b""
                        if self._dead:
                            return pos
                    if (
                        end + 2 < n  # another op follows (a lone answer: no patterns)
                        and len(size_tok) <= MIXED_BULK_SIZE_DIGITS_MAX
                        and len(line) == 7 + len(subject) + len(size_tok)
                    ):
                        # the ops after it alike (one size, no reply, single
                        # spaces): the whole stretch with two regex calls
                        extent, item = mixed_bulk(size_tok, limit - 9 - len(size_tok))
                        em = extent.match(buf, pos, min(n, pos + MIXED_WINDOW))
                        if em is not None:
                            stop = em.end()
                            subs, pays = zip(*item.findall(buf, pos, stop), strict=True)
                            mixed_s.extend(subs)
                            mixed_p.extend(pays)
                            pos = stop
                            m = match(buf, pos)
                            continue
                    mixed_s.append(subject)
                    mixed_p.append(buf[start:end])
                    pos = end + 2
                    m = match(buf, pos)
                    continue
                if mixed_s:
                    hand_mixed(on_mixed, mixed_s, mixed_p)
                    if self._dead:
                        return pos
                if subject != run_subject:
                    if payloads:
                        hand_run(on_pub, on_pub_run, run_subject, replies, payloads)
                        if self._dead:
                            return pos
                    run_subject = subject
                line_len = start - pos
                while True:
                    replies.append(reply)
                    payloads.append(buf[start:end])
                    pos = end + 2
                    if not buf.startswith(line, pos):
                        break
                    start = pos + line_len
                    end = start + size
                    if end + 2 > n or buf[end] != 13 or buf[end + 1] != 10:
                        break
                if (
                    reply is not None
                    and bulk_replies
                    and n - pos >= REPLY_BULK_MIN_BYTES
                    and len(size_tok) <= MIXED_BULK_SIZE_DIGITS_MAX
                ):
                    # more of this subject, each with its own reply (a JetStream
                    # publisher's window): the whole stretch with two regex calls
                    extent, item = reply_bulk(size_tok)
                    em = extent.match(buf, pos, min(n, pos + MIXED_WINDOW))
                    if em is not None and em.group(1) == subject:
                        stop = em.end()
                        rs, ps = zip(*item.findall(buf, pos, stop), strict=True)
                        if max(map(len, rs)) <= limit - 8 - len(subject) - len(size_tok):
                            replies.extend(rs)
                            payloads.extend(ps)
                            pos = stop
            m = match(buf, pos)
        if mixed_s:
            hand_mixed(on_mixed, mixed_s, mixed_p)
        elif payloads and on_pub_run is not None:
            hand_run(on_pub, on_pub_run, run_subject, replies, payloads)
        return pos

    def _fail(
        self, on_event: Callable[[Event | ProtocolViolation], object], err: str | None, detail: str
    ) -> None:
        self._dead = True
        self._buf = b""
        self._pend = None
        self._parts = []
        self._parts_len = 0
        on_event(ProtocolViolation(err, detail))

    # -- control lines ----------------------------------------------------

    def _control(self, line: bytes) -> Event | ProtocolViolation | tuple[Any, ...] | None:
        """Parse one control line.

        Returns an event, a pending-payload tuple, a violation, or None for a
        line that produces nothing.
        """
        parts = split_verb(line)
        if not parts or line[:1] in (b" ", b"\t"):
            return ProtocolViolation(ERR_UNKNOWN_OP, "empty line")
        verb = parts[0].upper()
        rest = parts[1] if len(parts) > 1 else b""
        role = self.role
        if verb.startswith(b"PING") and (len(verb) == 4 or role is not Role.CLIENT):
            return PING
        if verb.startswith(b"PONG") and (len(verb) == 4 or role is not Role.CLIENT):
            return PONG
        if role is Role.SERVER:
            return self._server_line(verb, rest, line)
        if role is Role.CLIENT:
            return self._client_line(verb, rest, line)
        if role is Role.LEAF:
            return leaf_line(verb, rest, self.ls_minus_origin, self.max_payload)
        return route_line(verb, rest, role is Role.ROUTE, self.ls_minus_origin, self.max_payload)

    def _server_line(
        self, verb: bytes, rest: bytes, line: bytes
    ) -> Event | ProtocolViolation | tuple[Any, ...] | None:
        if verb == b"PUB":
            if not rest:
                return missing_args(line)
            return self._pub_args(split_args(rest))
        if verb == b"HPUB":
            if not rest:
                return missing_args(line)
            if not self.headers:
                return ProtocolViolation(None, "HPUB without headers support")
            return self._hpub_args(split_args(rest))
        if verb == b"SUB":
            if not rest:
                return missing_args(line)
            args = split_args(rest)
            if len(args) == 2:
                return Sub(args[0], None, args[1])
            if len(args) == 3:
                return Sub(args[0], args[1], args[2])
            return ProtocolViolation(None, "SUB arguments")
        if verb == b"UNSUB":
            if not rest:
                return missing_args(line)
            args = split_args(rest)
            if len(args) == 1:
                return Unsub(args[0], None)
            if len(args) == 2:
                # nats-server treats a max that does not parse as <= 0: remove now
                mx = args[1]
                return Unsub(args[0], int(mx) if mx.isdigit() else 0)
            return ProtocolViolation(None, "UNSUB arguments")
        if verb.startswith(b"CONNECT"):
            # nats-server's argument starts right after the verb: CONNECT{} is
            # accepted, CONNECTX {} is bad JSON (silent close)
            ev = json_event(Connect, line[7:])
            if type(ev) is Connect and isinstance(ev.fields.get("headers"), bool):
                # nats-server applies CONNECT as it parses: an HPUB later in
                # the same chunk already sees the client's headers support
                self.headers = ev.fields["headers"]
            return ev
        if verb.startswith(b"INFO"):
            # a client's INFO is ignored when it is a JSON object, else fatal (silent)
            ev = json_event(Info, line[4:])
            return None if type(ev) is Info else ev
        if verb.startswith(b"+OK"):  # nats-server ignores the rest of a +OK line
            return OK
        if verb == b"-ERR":
            return Err(err_text(rest))
        return ProtocolViolation(ERR_UNKNOWN_OP, "unknown verb")

    def _client_line(
        self, verb: bytes, rest: bytes, line: bytes
    ) -> Event | ProtocolViolation | tuple[Any, ...] | None:
        if verb == b"MSG":
            args = split_args(rest)
            if len(args) not in (3, 4) or not args[-1].isdigit():
                return ProtocolViolation(None, "MSG arguments")
            size = int(args[-1])
            reply = args[2] if len(args) == 4 else None
            return (_K_MSG, size, args[0], args[1], reply)
        if verb == b"HMSG":
            args = split_args(rest)
            if len(args) not in (4, 5) or not (args[-1].isdigit() and args[-2].isdigit()):
                return ProtocolViolation(None, "HMSG arguments")
            hsize, total = int(args[-2]), int(args[-1])
            if hsize > total:
                return ProtocolViolation(None, "HMSG sizes")
            reply = args[2] if len(args) == 5 else None
            return (_K_HMSG, total, args[0], args[1], reply, hsize)
        if verb == b"INFO":
            return json_event(Info, rest)
        if verb == b"+OK":
            return OK
        if verb == b"-ERR":
            return Err(err_text(rest))
        return ProtocolViolation(ERR_UNKNOWN_OP, "unknown verb")

    def _pub_args(self, args: list[bytes]) -> tuple[Any, ...] | ProtocolViolation:
        if len(args) == 2:
            subject, reply, size_tok = args[0], None, args[1]
        elif len(args) == 3:
            subject, reply, size_tok = args
        else:
            return ProtocolViolation(None, "PUB arguments")
        if not size_tok.isdigit() or len(size_tok) > SIZE_DIGITS_MAX:
            return ProtocolViolation(None, "PUB size")
        size = int(size_tok)
        if size > self.max_payload:
            return ProtocolViolation(ERR_MAX_PAYLOAD, "payload size")
        return (_K_PUB, size, subject, reply)

    def _hpub_args(self, args: list[bytes]) -> tuple[Any, ...] | ProtocolViolation:
        if len(args) == 3:
            subject, reply = args[0], None
        elif len(args) == 4:
            subject, reply = args[0], args[1]
        else:
            return ProtocolViolation(None, "HPUB arguments")
        if (
            not (args[-1].isdigit() and args[-2].isdigit())
            or max(len(args[-1]), len(args[-2])) > SIZE_DIGITS_MAX
        ):
            return ProtocolViolation(None, "HPUB sizes")
        hsize, total = int(args[-2]), int(args[-1])
        if hsize > total:
            return ProtocolViolation(None, "HPUB header size larger than total")
        if total > self.max_payload:
            return ProtocolViolation(ERR_MAX_PAYLOAD, "payload size")
        return (_K_HPUB, total, subject, reply, hsize)

    @staticmethod
    def _payload_event(pend: tuple[Any, ...], body: bytes) -> Event:
        kind = pend[0]
        if kind == _K_HPUB:
            h = pend[4]
            return HPub(pend[2], pend[3], body[:h], body[h:])
        if kind == _K_MSG:
            return Msg(pend[2], pend[3], pend[4], body)
        if kind == _K_HMSG:
            h = pend[5]
            return HMsg(pend[2], pend[3], pend[4], body[:h], body[h:])
        # _K_RMSG
        h = pend[6]
        if h < 0:
            return RMsg(pend[2], pend[3], pend[4], pend[5], None, body)
        if h == 0 and pend[7]:  # an origin LMSG always has two sizes; 0: no headers
            return RMsg(pend[2], pend[3], pend[4], pend[5], None, body, pend[7])
        return RMsg(pend[2], pend[3], pend[4], pend[5], body[:h], body[h:], pend[7])
