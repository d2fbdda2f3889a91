"""Pure-Python stand-in for ``loadgen.c`` (used only when no C compiler exists).

Theory of operation: the same command line and the same JSON result line as
the C tool (``pub``/``sub``/``req``/``rep``, ``-H -P -s -n -z -b -i -w -k -t``),
over blocking sockets with ``select`` for the waits.  It is far slower than the
C tool: ``bench.core_bench`` compensates on the publishing side by running
several publisher processes, but one Python subscriber can cap what is
measured against nats-server — figures taken with it are marked as such.
"""

from __future__ import annotations

import argparse
import json
import select
import signal
import socket
import sys
import time

CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"lang":"python","name":"pyloadgen"}\r\n'


class Conn:
    """One NATS connection with an incremental inbound parser."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.pongs = 0
        self.msgs = 0
        self.closed = False
        self.err = ""
        self.out: list[bytes] = []
        self.on_msg = None
        self.sock.sendall(CONNECT)

    def pump(self, timeout: float) -> int:
        """Read once (waiting up to ``timeout``), parse, answer; -1 when closed."""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return 0
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError:
            data = b""
        if not data:
            self.closed = True
            return -1
        self._parse(self.buf + data if self.buf else data, time.monotonic())
        if self.out:
            self.sock.sendall(b"".join(self.out))
            self.out.clear()
        return len(data)

    def _parse(self, buf: bytes, now: float) -> None:
        pos = 0
        n = len(buf)
        on_msg = self.on_msg
        while pos < n:
            nl = buf.find(b"\n", pos)
            if nl < 0:
                break
            line = buf[pos:nl].rstrip(b"\r")
            if line.startswith((b"MSG ", b"HMSG ")):
                args = line.split()
                size = int(args[-1])
                end = nl + 1 + size
                if n < end + 2:
                    break
                self.msgs += 1
                if on_msg is not None:
                    nreply = 5 if args[0] == b"HMSG" else 4
                    reply = args[3] if len(args) == nreply + 1 else None
                    on_msg(args[1], reply, buf[nl + 1 : end], now)
                pos = end + 2
                continue
            up = line[:4].upper()
            if up == b"PING":
                self.out.append(b"PONG\r\n")
            elif up == b"PONG":
                self.pongs += 1
            elif line.startswith(b"-ERR"):
                self.err = line.decode(errors="replace").replace('"', "'")
                print("pyloadgen: server said:", self.err, file=sys.stderr)
            pos = nl + 1
        self.buf = buf[pos:]

    def ping_sync(self, sent: list[int], timeout: float) -> bool:
        self.sock.sendall(b"PING\r\n")
        sent[0] += 1
        deadline = time.monotonic() + timeout
        while self.pongs < sent[0]:
            if self.pump(0.1) < 0 or time.monotonic() > deadline:
                return False
        return True


def _payload(size: int) -> bytes:
    return bytes(97 + i % 26 for i in range(size))


def mode_pub(o: argparse.Namespace) -> int:
    c = Conn(o.H, o.P)
    pings = [0]
    c.ping_sync(pings, o.t)
    rec = b"PUB %s %d\r\n" % (o.s.encode(), o.z) + _payload(o.z) + b"\r\n"
    per = max(1, o.b // len(rec))
    block = rec * per
    sent = 0
    next_ping = o.i if o.i > 0 else -1
    waits = 0
    t0 = time.monotonic()
    while sent < o.n and not c.closed:
        k = min(per, o.n - sent)
        if next_ping > 0 and sent + k > next_ping:
            k = next_ping - sent
        c.sock.sendall(block if k == per else rec * k)
        sent += k
        if sent == next_ping:
            c.sock.sendall(b"PING\r\n")
            pings[0] += 1
            next_ping += o.i
            while pings[0] - c.pongs > o.w and not c.closed:
                waits += 1
                c.pump(0.1)
        else:
            c.pump(0)
    t_written = time.monotonic()
    ok = not c.closed and c.ping_sync(pings, o.t)
    el = time.monotonic() - t0
    _emit(
        mode="pub",
        ok=ok,
        msgs=sent,
        size=o.z,
        elapsed_s=el,
        write_s=t_written - t0,
        msgs_per_s=sent / el if el else 0.0,
        ping_every=o.i,
        max_pings_out=o.w,
        pace_waits=waits,
        closed=c.closed,
        err=c.err,
    )
    return 0 if ok else 1


def _subscribe(c: Conn, subject: str, o: argparse.Namespace) -> bool:
    c.sock.sendall(b"SUB %s 1\r\n" % subject.encode())
    return c.ping_sync([0], o.t)


def mode_sub(o: argparse.Namespace) -> int:
    c = Conn(o.H, o.P)
    times = [0.0, 0.0]

    def on_msg(subj: bytes, reply: bytes | None, payload: bytes, now: float) -> None:
        if c.msgs == 1:
            times[0] = now
        times[1] = now

    c.on_msg = on_msg
    if not _subscribe(c, o.s, o):
        return 1
    print("READY", flush=True)
    t_ready = last = time.monotonic()
    timed_out = False
    while c.msgs < o.n:
        r = c.pump(0.2)
        if r < 0:
            break
        t = time.monotonic()
        if r > 0:
            last = t
        elif t - last > (o.t if c.msgs else o.t * 10):
            timed_out = True
            break
    span = times[1] - times[0] if c.msgs > 1 else 0.0
    _emit(
        mode="sub",
        ok=c.msgs >= o.n,
        msgs=c.msgs,
        expected=o.n,
        bad_size=0,
        first_to_last_s=span,
        msgs_per_s=(c.msgs - 1) / span if span else 0.0,
        ready_to_last_s=times[1] - t_ready if c.msgs else 0.0,
        closed=c.closed,
        timeout=timed_out,
        err=c.err,
        python_loadgen=True,
    )
    return 0 if c.msgs >= o.n else 1


def mode_rep(o: argparse.Namespace) -> int:
    c = Conn(o.H, o.P)
    replied = [0]

    def on_msg(subj: bytes, reply: bytes | None, payload: bytes, now: float) -> None:
        if reply is not None:
            c.out.append(b"PUB %s %d\r\n%s\r\n" % (reply, len(payload), payload))
            replied[0] += 1

    c.on_msg = on_msg
    if not _subscribe(c, o.s, o):
        return 1
    print("READY", flush=True)
    last = time.monotonic()
    while o.n <= 0 or replied[0] < o.n:
        r = c.pump(0.2)
        if r < 0:
            break
        if r > 0:
            last = time.monotonic()
        elif time.monotonic() - last > o.t * 10:
            break
    _emit(mode="rep", replied=replied[0], closed=c.closed, err=c.err)
    return 0


def mode_req(o: argparse.Namespace) -> int:
    c = Conn(o.H, o.P)
    sent_at: dict[int, float] = {}
    lat: list[float] = []
    issued = [0]
    payload = _payload(o.z)
    subj = o.s.encode()

    def issue() -> None:
        i = issued[0]
        issued[0] += 1
        c.out.append(b"PUB %s _INBOX.lg.%d %d\r\n%s\r\n" % (subj, i, o.z, payload))
        sent_at[i] = time.monotonic()

    def on_msg(s: bytes, reply: bytes | None, p: bytes, now: float) -> None:
        t = sent_at.pop(int(s.rsplit(b".", 1)[1]), None)
        if t is None:
            return
        lat.append(now - t)
        if issued[0] < o.n:
            issue()

    c.on_msg = on_msg
    if not _subscribe(c, "_INBOX.lg.*", o):
        return 1
    t0 = time.monotonic()
    for _ in range(min(max(o.k, 1), o.n)):
        issue()
    c.sock.sendall(b"".join(c.out))
    c.out.clear()
    last = t0
    timed_out = False
    while len(lat) < o.n:
        r = c.pump(0.2)
        if r < 0:
            break
        if r > 0:
            last = time.monotonic()
        elif time.monotonic() - last > o.t:
            timed_out = True
            break
    el = time.monotonic() - t0
    lat.sort()

    def pct(q: float) -> float:
        return lat[int((len(lat) - 1) * q)] * 1e6 if lat else 0.0

    _emit(
        mode="req",
        ok=len(lat) == o.n,
        requests=o.n,
        done=len(lat),
        inflight=max(o.k, 1),
        elapsed_s=el,
        rps=len(lat) / el if el else 0.0,
        lat_us={"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": pct(1.0)},
        unknown_replies=0,
        closed=c.closed,
        timeout=timed_out,
        err=c.err,
    )
    return 0 if len(lat) == o.n else 1


def _emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pyloadgen")
    p.add_argument("mode", choices=["pub", "sub", "req", "rep"])
    p.add_argument("-H", default="127.0.0.1")
    p.add_argument("-P", type=int, default=4222)
    p.add_argument("-s", default="bench.core")
    p.add_argument("-n", type=int, default=1000000)
    p.add_argument("-z", type=int, default=128)
    p.add_argument("-b", type=int, default=65536)
    p.add_argument("-i", type=int, default=0)
    p.add_argument("-w", type=int, default=1)
    p.add_argument("-k", type=int, default=1)
    p.add_argument("-t", type=float, default=10.0)
    o = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    return {"pub": mode_pub, "sub": mode_sub, "req": mode_req, "rep": mode_rep}[o.mode](o)


if __name__ == "__main__":
    sys.exit(main())
