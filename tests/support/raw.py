"""A raw NATS protocol client over a plain (or TLS) socket, with timeouts.

Theory of operation: ``RawClient`` connects, reads the INFO line, and then lets
a test send bytes and collect what comes back.  ``exchange(data)`` sends
``data`` followed by ``PING\\r\\n`` and reads until the PONG that answers that
PING (the count of PONGs the input itself asks for is given by the caller, or
estimated by counting ``PING`` verbs), until the server closes, or until a
bounded deadline — so every read is either an event (PONG, EOF) or a bounded
wait.  ``Transcript`` holds the bytes and whether the connection closed;
``split_ops`` cuts server output into ops (MSG/HMSG with their payloads) so
tests can normalise INFO lines and server-initiated PINGs before comparing.

Synchronous on purpose: usable from plain tests, hypothesis tests, and
(briefly) from trio tests.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import time
from dataclasses import dataclass

DEFAULT_TIMEOUT_S = 5.0
RECV_BYTES = 65536


@dataclass
class Transcript:
    """What the server sent in response to some input."""

    output: bytes
    closed: bool
    timed_out: bool = False

    def ops(self) -> list[bytes]:
        return split_ops(self.output)

    def errors(self) -> list[bytes]:
        """The ``-ERR`` lines (without CRLF)."""
        return [op for op in self.ops() if op.startswith(b"-ERR")]

    def normalised(self, *, drop_pings: bool = True) -> list[bytes]:
        return normalise(self.ops(), drop_pings=drop_pings)


def split_ops(data: bytes) -> list[bytes]:
    """Cut server output into ops: control lines (no CRLF); MSG/HMSG include their payload.

    A trailing incomplete op is returned as-is (prefixed ``PARTIAL:``).
    """
    out: list[bytes] = []
    pos = 0
    n = len(data)
    while pos < n:
        nl = data.find(b"\r\n", pos)
        if nl < 0:
            out.append(b"PARTIAL:" + data[pos:])
            break
        line = data[pos:nl]
        pos = nl + 2
        verb = line.split(b" ", 1)[0].upper()
        if verb in (b"MSG", b"HMSG"):
            try:
                size = int(line.split()[-1])
            except ValueError:
                out.append(line)
                continue
            if pos + size + 2 > n:
                out.append(b"PARTIAL:" + line + b"\r\n" + data[pos:])
                break
            out.append(line + b"\r\n" + data[pos : pos + size])
            pos += size + 2
        else:
            out.append(line)
    return out


_INFO_RE = re.compile(rb"^INFO .*$", re.S)


def normalise(ops: list[bytes], *, drop_pings: bool = True) -> list[bytes]:
    """Replace every INFO with ``b"INFO"``; drop server-initiated PINGs.

    MSG/HMSG lines keep their bytes but collapse the double space nats-server
    writes for an empty reply token (``MSG a 1  0`` → ``MSG a 1 0``).
    """
    res: list[bytes] = []
    for op in ops:
        if op.startswith(b"INFO "):
            res.append(b"INFO")
        elif drop_pings and op == b"PING":
            continue
        elif op.startswith((b"MSG ", b"HMSG ")):
            head, sep, body = op.partition(b"\r\n")
            res.append(b" ".join(head.split()) + sep + body)
        else:
            res.append(op)
    return res


def count_pings(data: bytes) -> int:
    """How many PING verbs ``data`` holds at line starts (a good estimate for PONGs owed)."""
    return sum(1 for line in data.split(b"\n") if line.strip(b"\r").upper().startswith(b"PING"))


class RawClient:
    """One raw connection.

    Args:
        host, port: where to connect.
        timeout: per-operation socket timeout and default exchange deadline.
        tls: if given, upgrade to TLS after the INFO line (as NATS clients do).
        server_hostname: name to verify in TLS.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        tls: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        read_info: bool = True,
    ) -> None:
        self.timeout = timeout
        self.sock: socket.socket = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = b""
        self.eof = False
        self.info_line = b""
        self.info: dict[str, object] = {}
        if read_info:
            self.info_line = self.read_line()
            assert self.info_line.startswith(b"INFO "), self.info_line
            self.info = json.loads(self.info_line[5:].strip())
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname=server_hostname or host)
            self.sock.settimeout(timeout)

    # -- io ---------------------------------------------------------------

    def send(self, data: bytes) -> bool:
        """Send all of ``data``; False if the server already closed."""
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            return False

    def _recv(self, deadline: float) -> bool:
        """Read once into ``buf``.  False on EOF/reset or when the deadline passed."""
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(RECV_BYTES)
        except TimeoutError:
            return False
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError, OSError):
            self.eof = True
            return False
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def read_line(self, timeout: float | None = None) -> bytes:
        """One CRLF-terminated line (without CRLF); b"" on EOF/timeout."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while b"\r\n" not in self.buf:
            if not self._recv(deadline):
                return b""
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def read_until_closed(self, timeout: float | None = None) -> Transcript:
        """Everything until the server closes (or the deadline)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while self._recv(deadline):
            pass
        out, self.buf = self.buf, b""
        return Transcript(out, self.eof, timed_out=not self.eof)

    def exchange(
        self,
        data: bytes = b"",
        *,
        timeout: float | None = None,
        pongs_owed: int | None = None,
        ping: bytes = b"PING\r\n",
    ) -> Transcript:
        """Send ``data`` + PING; read until its PONG, a close, or the deadline.

        Args:
            data: bytes to send first.
            timeout: bound on the whole read (default: the client timeout).
            pongs_owed: PONGs ``data`` itself will produce (default: estimated).
            ping: the trailing sync bytes (b"" for none: read until close/deadline).
        """
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        want = (count_pings(data) if pongs_owed is None else pongs_owed) + (1 if ping else 0)
        self.send(data + ping)
        start = len(self.buf)
        while True:
            ops = split_ops(self.buf[start:] if start else self.buf)
            if want and sum(1 for op in ops if op == b"PONG") >= want:
                break
            if not self._recv(deadline):
                break
        out, self.buf = self.buf, b""
        closed = self.eof
        got = sum(1 for op in split_ops(out) if op == b"PONG")
        return Transcript(out, closed, timed_out=not closed and got < want)

    def ping_ok(self, timeout: float | None = None) -> bool:
        """True if a PING gets a PONG (the connection is usable)."""
        t = self.exchange(b"", timeout=timeout)
        return not t.closed and b"PONG" in t.ops()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect_line(**fields: object) -> bytes:
    """``CONNECT {...}\\r\\n`` with the given fields."""
    return b"CONNECT " + json.dumps(fields, separators=(",", ":")).encode() + b"\r\n"


def transcript(
    host: str,
    port: int,
    data: bytes,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    pongs_owed: int | None = None,
) -> Transcript:
    """Open a connection, run one ``exchange(data)``, close."""
    with RawClient(host, port, timeout=timeout) as c:
        return c.exchange(data, timeout=timeout, pongs_owed=pongs_owed)
