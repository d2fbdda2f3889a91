"""Differential harness: the same raw JetStream requests to nats-server and trijet.

Theory of operation
-------------------
``start_pair(tmp)`` starts the reference nats-server and trijet, both with
``-js -sd <tmp dir>``, on 127.0.0.1.  A ``JsClient`` is a small synchronous
protocol client (``CONNECT`` with headers and no-responders, one wildcard
inbox subscription) that sends a request with ``PUB``/``HPUB`` and collects
the messages arriving on that request's own reply subject:

* ``expect="one"``: the first message ends the exchange (API JSON, PubAck,
  a direct-get message or status);
* ``expect="eob"``: messages until a status message (``NATS/1.0 204 EOB``,
  ``404``, ``408`` …) — batch direct gets;
* nothing within ``wait_s`` seconds is an answer too: "no reply".

``Pair.exchange(steps)`` runs a list of ``Req`` on both servers (each on a
fresh connection) and returns the two transcripts as lists of text, one entry
per step, normalised by ``normalise_frame``: volatile values (``created``,
``ts``, ``first_ts``, ``last_ts``, ``time``, the ``leader`` server name, the
``Nats-Time-Stamp`` header) become ``<t>`` unless they are Go's zero time,
and the values of the server-owned ``_nats.ver``/``_nats.level`` metadata
keys and of ``api.level`` become ``<v>``/``<n>`` (trijet is 2.11.17, level 1;
the reference 2.15.1, level 5); their presence and ``_nats.req.level`` are
compared.  Everything else — key order,
``\\u003e`` escapes, omitted fields, header order — is compared as text.
``Pair.reset()`` deletes every stream on both servers between scenarios.

The reference removes a deleted stream's directory asynchronously, so a
create of the same name right after may fail with 10049; the harness retries
that create on the reference only (it is the reference racing itself).
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tests.support.servers import ServerProcess, start_server

REQUEST_WAIT_S = 3.0
"""Longest wait for an answer that is expected to come."""
NO_REPLY_WAIT_S = 0.4
"""How long a step marked ``expect="none"`` waits before concluding "no reply"."""
STORE_RACE_RETRIES = 40
STORE_RACE_PAUSE_S = 0.05
RECV_BYTES = 65536

Expect = Literal["one", "eob", "none"]


@dataclass(frozen=True)
class Req:
    """One request of a scenario.

    Attributes:
        subject: where to publish.
        body: the payload (``str`` is UTF-8 encoded).
        headers: a full header block (``NATS/1.0\\r\\n…\\r\\n\\r\\n``) or None.
        expect: ``"one"`` message, messages until a status (``"eob"``), or
            ``"none"`` (wait ``NO_REPLY_WAIT_S``; whatever arrives is recorded).
        reply: False publishes without a reply subject (nothing can come back).
    """

    subject: str
    body: str | bytes = b""
    headers: bytes | None = None
    expect: Expect = "one"
    reply: bool = True

    @property
    def payload(self) -> bytes:
        return self.body.encode() if isinstance(self.body, str) else self.body


@dataclass(frozen=True)
class Frame:
    """One message received on a reply subject."""

    headers: bytes | None
    payload: bytes

    @property
    def is_status(self) -> bool:
        """A status-only message (``NATS/1.0 <code> …``)."""
        if not self.headers:
            return False
        return self.headers.split(b"\r\n", 1)[0].strip() != b"NATS/1.0"

    def json(self) -> dict[str, object]:
        out: dict[str, object] = json.loads(self.payload)
        return out


class ProtocolError(RuntimeError):
    """The server sent something the harness does not understand (or -ERR)."""


class JsClient:
    """A minimal synchronous NATS client for request transcripts.

    Args:
        host, port: the server.
    """

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=REQUEST_WAIT_S)
        self.buf = b""
        self.inbox = f"_JSDIFF.{id(self):x}"
        self.n = 0
        self.pending: dict[str, list[Frame]] = {}
        line = self._line(time.monotonic() + REQUEST_WAIT_S)
        if not line.startswith(b"INFO "):
            raise ProtocolError(f"expected INFO, got {line!r}")
        connect = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True}
        self.sock.sendall(
            b"CONNECT " + json.dumps(connect).encode() + b"\r\n"
            b"SUB " + self.inbox.encode() + b".* 1\r\nPING\r\n"
        )
        deadline = time.monotonic() + REQUEST_WAIT_S
        while self._next(deadline) != "PONG":
            pass

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # -- reading ---------------------------------------------------------------

    def _fill(self, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(RECV_BYTES)
        except TimeoutError:
            return False
        if not chunk:
            raise ProtocolError("server closed the connection")
        self.buf += chunk
        return True

    def _line(self, deadline: float) -> bytes:
        while b"\r\n" not in self.buf:
            if not self._fill(deadline):
                return b""
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _exact(self, n: int, deadline: float) -> bytes:
        while len(self.buf) < n + 2:
            if not self._fill(deadline):
                raise ProtocolError("timed out inside a message")
        data, self.buf = self.buf[:n], self.buf[n + 2 :]
        return data

    def _next(self, deadline: float) -> str | None:
        """Read one op; MSG/HMSG go to ``pending``.  Returns the verb, None on timeout."""
        line = self._line(deadline)
        if not line:
            return None
        verb = line.split(b" ", 1)[0].upper().decode()
        if verb == "PING":
            self.sock.sendall(b"PONG\r\n")
        elif verb in ("MSG", "HMSG"):
            parts = line.split()
            subject = parts[1].decode()
            total = int(parts[-1])
            hlen = int(parts[-2]) if verb == "HMSG" else 0
            data = self._exact(total, deadline + REQUEST_WAIT_S)
            frame = Frame(data[:hlen] if verb == "HMSG" else None, data[hlen:])
            self.pending.setdefault(subject, []).append(frame)
        elif verb == "-ERR":
            raise ProtocolError(line.decode(errors="replace"))
        return verb

    # -- requests --------------------------------------------------------------

    def request(self, req: Req) -> list[Frame]:
        """Send ``req``; the frames that answered it (``[]``: no reply)."""
        self.n += 1
        reply = f"{self.inbox}.{self.n}" if req.reply else ""
        payload = req.payload
        subj = req.subject.encode()
        rep = (b" " + reply.encode()) if reply else b""
        if req.headers is not None:
            h = req.headers
            head = b"HPUB %s%s %d %d\r\n" % (subj, rep, len(h), len(h) + len(payload))
            self.sock.sendall(head + h + payload + b"\r\n")
        else:
            self.sock.sendall(b"PUB %s%s %d\r\n" % (subj, rep, len(payload)) + payload + b"\r\n")
        wait = NO_REPLY_WAIT_S if (req.expect == "none" or not reply) else REQUEST_WAIT_S
        deadline = time.monotonic() + wait
        got = self.pending.setdefault(reply, [])
        while True:
            if req.expect == "one" and got:
                break
            if req.expect == "eob" and got and got[-1].is_status:
                break
            if self._next(deadline) is None and time.monotonic() >= deadline:
                break
        return self.pending.pop(reply, [])


# --------------------------------------------------------------------------- normalising

ZERO_TIME = "0001-01-01T00:00:00Z"
_VOLATILE = re.compile(r'"(created|ts|first_ts|last_ts|time|leader|start|pause_until)":"([^"]*)"')
_SERVER_META = re.compile(r'"(_nats\.ver|_nats\.level)":"[^"]*"')
_STAMP = re.compile(rb"(Nats-Time-Stamp: )[^\r]*")
_API_LEVEL = re.compile(r'"api":\{"level":\d+,')


def _volatile(m: re.Match[str]) -> str:
    key, value = m.group(1), m.group(2)
    return m.group(0) if value == ZERO_TIME else f'"{key}":"<t>"'


def normalise_text(text: str) -> str:
    """Volatile values -> ``<t>``; the server's version and API level masked."""
    text = _VOLATILE.sub(_volatile, text)
    text = _API_LEVEL.sub('"api":{"level":<n>,', text)  # trijet reports its own level
    return _SERVER_META.sub(r'"\1":"<v>"', text)


def normalise_frame(frame: Frame) -> str:
    """One received message as comparable text: ``[headers |] payload``."""
    body = normalise_text(frame.payload.decode(errors="replace"))
    if frame.headers is None:
        return body
    hdr = _STAMP.sub(rb"\1<t>", frame.headers).decode(errors="replace")
    return hdr.replace("\r\n", "\\r\\n") + " | " + body


def render(frames: Sequence[Frame]) -> str:
    """Frames of one step as text (``<no reply>`` when nothing came)."""
    if not frames:
        return "<no reply>"
    return " ++ ".join(normalise_frame(f) for f in frames)


# --------------------------------------------------------------------------- the pair


@dataclass
class Pair:
    """The reference nats-server and trijet, both with JetStream."""

    ref: ServerProcess
    trijet: ServerProcess

    @contextmanager
    def clients(self) -> Iterator[tuple[JsClient, JsClient]]:
        a = JsClient(self.ref.host, self.ref.port)
        try:
            b = JsClient(self.trijet.host, self.trijet.port)
            try:
                yield a, b
            finally:
                b.close()
        finally:
            a.close()

    def exchange(self, steps: Sequence[Req]) -> tuple[list[str], list[str]]:
        """Run ``steps`` on both servers; ``(reference, trijet)`` transcripts."""
        ref_out: list[str] = []
        tj_out: list[str] = []
        with self.clients() as (ref, tj):
            for step in steps:
                ref_out.append(render(_ref_request(ref, step)))
                tj_out.append(render(tj.request(step)))
        return ref_out, tj_out

    def both(self, steps: Sequence[Req]) -> tuple[list[list[Frame]], list[list[Frame]]]:
        """Like ``exchange`` but the raw frames (for assertions of one's own)."""
        with self.clients() as (ref, tj):
            return [_ref_request(ref, s) for s in steps], [tj.request(s) for s in steps]

    def reset(self) -> None:
        """Delete every stream on both servers."""
        with self.clients() as clients:
            for c in clients:
                names = c.request(Req("$JS.API.STREAM.NAMES"))[0].json().get("streams") or []
                for name in names:  # type: ignore[attr-defined]
                    c.request(Req(f"$JS.API.STREAM.DELETE.{name}"))

    def stop(self) -> None:
        for s in (self.ref, self.trijet):
            s.stop()


def _ref_request(c: JsClient, step: Req) -> list[Frame]:
    frames = c.request(step)
    if not step.subject.startswith("$JS.API.STREAM.CREATE."):
        return frames
    for _ in range(STORE_RACE_RETRIES):
        if not frames or frames[0].headers is not None:
            return frames
        err = frames[0].json().get("error")
        if not isinstance(err, dict) or err.get("err_code") != 10049:
            return frames
        time.sleep(STORE_RACE_PAUSE_S)  # the reference's own async directory removal
        frames = c.request(step)
    return frames


def start_pair(tmp: Path) -> Pair:
    """Start both servers under ``tmp`` (``ref/`` and ``trijet/``)."""
    ref = start_server("reference", ["-js", "-sd", str(tmp / "ref-store")], workdir=tmp / "ref")
    try:
        tj = start_server("trijet", ["-js", "-sd", str(tmp / "tj-store")], workdir=tmp / "trijet")
    except BaseException:
        ref.stop()
        raise
    return Pair(ref, tj)
