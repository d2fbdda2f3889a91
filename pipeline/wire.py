"""A minimal NATS client connection for the source's data plane (pull responses only).

Theory of operation: a reading task receives up to hundreds of thousands of messages per
second; nats-py spends most of its time per message building ``Msg`` objects and passing them
through an asyncio queue.  This connection speaks just what a pull reader needs — ``CONNECT``
(user/password or token, TLS upgrade after ``INFO``), ``SUB`` of one inbox, ``PUB`` of pull
requests, ``PING``/``PONG`` — and parses ``MSG``/``HMSG`` straight out of the receive buffer:
an optional ``fast`` path (the pull reader's) decodes runs of deliveries in bulk first; every
other frame goes to ``on_msg(subject, reply, header_bytes, payload)``.  Control requests
(consumer create/delete, stream info) stay on nats-py.  Servers that want nkeys/JWT
credentials are read through nats-py instead (``supports``).

Header blocks are parsed by ``parse_headers`` (multi-valued, status line kept apart).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable
from urllib.parse import urlparse

from pipeline.plan import ConnectOptions

READ_CHUNK = 1 << 20
CONNECT_TIMEOUT_S = 5.0

OnMsg = Callable[[bytes, bytes | None, bytes | None, bytes], None]
FastPath = Callable[[bytes, int, int], int]
"""``fast(buf, pos, n) -> pos'``: consume as many frames from ``buf[pos:n]`` as it can (only
complete ones), return where it stopped; the generic parser takes the frame there."""


class WireError(RuntimeError):
    """The server refused us (``-ERR``) or the connection broke."""


def supports(conn: ConnectOptions) -> bool:
    """True when this client can authenticate as ``conn`` asks (no nkeys/JWT)."""
    return not (conn.creds or conn.nkeys_seed)


def parse_headers(block: bytes) -> tuple[str | None, list[tuple[str, list[str]]]]:
    """``NATS/1.0[ code desc]\\r\\nK: V\\r\\n…\\r\\n\\r\\n`` → (status code or None, pairs).

    Repeated keys keep every value in order.
    """
    lines = block.decode("utf-8", "replace").split("\r\n")
    first = lines[0]
    status = first[9:12] if len(first) >= 12 else None
    out: dict[str, list[str]] = {}
    for ln in lines[1:]:
        if not ln:
            continue
        k, sep, v = ln.partition(":")
        if sep:
            out.setdefault(k.strip(), []).append(v.strip())
    return status, list(out.items())


class RawConnection:
    """One connection; ``start(on_msg)`` runs the receive loop as a task."""

    def __init__(self, conn: ConnectOptions, name: str) -> None:
        self.conn, self.name = conn, name
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self.error: BaseException | None = None

    async def connect(self) -> None:
        """Connect to the first server that answers; raise the last error otherwise."""
        last: BaseException | None = None
        for url in self.conn.servers:
            try:
                await asyncio.wait_for(self._connect(url), CONNECT_TIMEOUT_S)
                return
            except (OSError, TimeoutError, WireError) as e:
                last = e
                await self._drop()
        raise WireError(f"cannot connect to any of {', '.join(self.conn.servers)}: {last}")

    async def _connect(self, url: str) -> None:
        u = urlparse(url)
        host, port = u.hostname or "127.0.0.1", u.port or 4222
        reader, writer = await asyncio.open_connection(host, port, limit=READ_CHUNK * 4)
        self._reader, self._writer = reader, writer
        line = await reader.readline()
        if not line.startswith(b"INFO "):
            raise WireError(f"expected INFO from {url}, got {line[:40]!r}")
        info = json.loads(line[5:])
        want_tls = u.scheme == "tls" or bool(self.conn.tls_ca or self.conn.tls_cert)
        if info.get("tls_required") or want_tls:
            ctx = ssl.create_default_context(cafile=self.conn.tls_ca)
            if self.conn.tls_cert:
                ctx.load_cert_chain(self.conn.tls_cert, self.conn.tls_key)
            await writer.start_tls(ctx, server_hostname=self.conn.tls_hostname or host)
        opts: dict[str, object] = {
            "verbose": False,
            "pedantic": False,
            "headers": True,
            "no_responders": True,
            "protocol": 1,
            "lang": "python-trijet-spark",
            "version": "1",
            "name": self.name,
        }
        if self.conn.user:
            opts["user"], opts["pass"] = self.conn.user, self.conn.password or ""
        if self.conn.token:
            opts["auth_token"] = self.conn.token
        writer.write(b"CONNECT " + json.dumps(opts).encode() + b"\r\nPING\r\n")
        await writer.drain()
        while True:
            line = await reader.readline()
            if not line:
                raise WireError(f"{url} closed the connection during CONNECT")
            if line.startswith(b"PONG"):
                return
            if line.startswith(b"-ERR"):
                raise WireError(f"{url}: {line.decode(errors='replace').strip()}")

    def subscribe(self, subject: str, sid: int = 1) -> None:
        assert self._writer is not None
        self._writer.write(f"SUB {subject} {sid}\r\n".encode())

    def publish(self, subject: str, payload: bytes, reply: str) -> None:
        assert self._writer is not None
        self._writer.write(
            b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), reply.encode(), len(payload), payload)
        )

    def start(
        self,
        on_msg: OnMsg,
        on_error: Callable[[BaseException], None],
        fast: FastPath | None = None,
    ) -> None:
        """Run the receive loop; ``on_error`` once if it ends by an error.

        ``fast`` (optional) sees the receive buffer first and decodes the frames it knows in
        bulk (the pull reader's ``MSG``/``HMSG`` deliveries); everything else — and any frame it
        leaves — goes through the generic parser to ``on_msg``.
        """

        async def loop() -> None:
            try:
                await self._receive(on_msg, fast)
            except asyncio.CancelledError:
                raise
            except BaseException as e:
                self.error = e
                on_error(e)

        self._task = asyncio.ensure_future(loop())

    async def _receive(self, on_msg: OnMsg, fast: FastPath | None = None) -> None:
        reader, writer = self._reader, self._writer
        assert reader is not None and writer is not None
        buf = b""
        while True:
            chunk = await reader.read(READ_CHUNK)
            if not chunk:
                raise WireError("connection closed by the server")
            buf = buf + chunk if buf else chunk
            pos, n = 0, len(buf)
            while pos < n:
                if fast is not None:
                    pos = fast(buf, pos, n)
                    if pos >= n:
                        break
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                op = buf[pos : pos + 4]
                if op == b"HMSG":
                    parts = buf[pos + 5 : eol].split(b" ")
                    total = int(parts[-1])
                    end = eol + 2 + total
                    if end + 2 > n:
                        break
                    hlen = int(parts[-2])
                    reply = parts[2] if len(parts) == 5 else None
                    hstart = eol + 2
                    on_msg(parts[0], reply, buf[hstart : hstart + hlen], buf[hstart + hlen : end])
                    pos = end + 2
                elif op == b"MSG ":
                    parts = buf[pos + 4 : eol].split(b" ")
                    size = int(parts[-1])
                    end = eol + 2 + size
                    if end + 2 > n:
                        break
                    reply = parts[2] if len(parts) == 4 else None
                    on_msg(parts[0], reply, None, buf[eol + 2 : end])
                    pos = end + 2
                else:
                    line = buf[pos:eol]
                    pos = eol + 2
                    if line.startswith(b"PING"):
                        writer.write(b"PONG\r\n")
                    elif line.startswith(b"-ERR"):
                        raise WireError(line.decode(errors="replace"))
                    # +OK, PONG, INFO: nothing to do
            buf = buf[pos:]

    async def _drop(self) -> None:
        w, self._writer, self._reader = self._writer, None, None
        if w is not None:
            w.close()
            try:
                await w.wait_closed()
            except (OSError, ssl.SSLError):
                pass

    async def close(self) -> None:
        """Stop the loop and close the socket."""
        t, self._task = self._task, None
        if t is not None:
            t.cancel()
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        await self._drop()
