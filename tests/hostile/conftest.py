"""Hostile-input suite: trijet and the reference nats-server side by side.

Theory of operation: one pair of servers per module (``pair``: JetStream on,
monitoring on, each its own store), both on 127.0.0.1 with ephemeral ports.
A case sends the same hostile bytes to both over a fresh connection and
compares what came back (``tests.support.raw`` normalisation); meanwhile an
*observer* — another client connected before the input was sent — must get
its PING answered within ``LIVENESS_S`` (a generous bound on liveness, not a
timing assertion), and afterwards the server process must still be running.

``api`` sends one JetStream API request and returns its decoded reply
(``None`` when nothing came back within the bound), with volatile fields
(times, ids) left for the caller to drop via ``strip_volatile``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import RawClient, ServerProcess, reference_binary, start_server
from tests.support.raw import connect_line

CONNECT = connect_line(verbose=False, pedantic=False, protocol=1, headers=True)
LIVENESS_S = 5.0
REPLY_S = 30.0
# times and ids; "level": trijet advertises API level 1 (nats-server 2.11), the reference 5
VOLATILE = {
    "created", "ts", "server_id", "server_name", "now", "first_ts", "last_ts", "id", "level",
}  # fmt: skip


def require_reference() -> None:
    if reference_binary() is None:
        pytest.skip("reference nats-server not installed")


def start_pair(
    base: Path, args: list[str] | None = None, *, config: str | None = None
) -> dict[str, ServerProcess]:
    """trijet and the reference with the same flags (JetStream + monitoring by
    default) and conf-file text, if any."""
    require_reference()
    out: dict[str, ServerProcess] = {}
    try:
        for kind in ("trijet", "reference"):
            wd = base / kind
            flags = args if args is not None else ["-js", "-sd", str(wd / "store"), "-m", "-1"]
            out[kind] = start_server(kind, flags, config=config, workdir=wd)  # type: ignore[arg-type]
    except BaseException:
        for sp in out.values():
            sp.stop()
        raise
    return out


def stop_pair(pair: dict[str, ServerProcess]) -> None:
    for sp in pair.values():
        sp.stop()
        print(f"--- {sp.kind} rc={sp.returncode} log tail ---\n{sp.log_text()[-2000:]}")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    p = start_pair(tmp_path_factory.mktemp("hostile"))
    try:
        yield p
    finally:
        stop_pair(p)


class Observer:
    """A connected client whose PINGs prove the server keeps serving."""

    def __init__(self, sp: ServerProcess) -> None:
        self.sp = sp
        self.client = RawClient(sp.host, sp.port, timeout=LIVENESS_S)
        assert b"PONG" in self.client.exchange(CONNECT).ops()

    def assert_serving(self) -> None:
        assert self.client.ping_ok(timeout=LIVENESS_S), f"{self.sp.kind}: PING unanswered"
        assert self.sp.alive(), f"{self.sp.kind} exited\n{self.sp.log_text()[-3000:]}"

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Observer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_msg(
    c: RawClient, sid: bytes = b"1", timeout: float = REPLY_S, *, with_headers: bool = False
) -> bytes | None:
    """The payload of the next MSG/HMSG for ``sid`` (None on timeout/close);
    ``with_headers``: the header block and the payload."""
    deadline = time.monotonic() + timeout
    while True:
        buf = c.buf
        for verb in (b"MSG ", b"HMSG "):
            i = buf.find(verb)
            if i < 0:
                continue
            nl = buf.find(b"\r\n", i)
            if nl < 0:
                break
            head = buf[i:nl].split()
            size = int(head[-1])
            start = nl + 2
            if len(buf) >= start + size + 2 and head[2] == sid:
                hdr = int(head[-2]) if verb == b"HMSG " else 0
                payload = buf[start + (0 if with_headers else hdr) : start + size]
                c.buf = buf[start + size + 2 :]
                return payload
        if not c._recv(deadline):
            return None


def send_api(c: RawClient, subject: str, body: bytes) -> None:
    c.send(b"PUB %s r.1 %d\r\n%s\r\n" % (subject.encode(), len(body), body))


def api_client(sp: ServerProcess) -> RawClient:
    c = RawClient(sp.host, sp.port, timeout=REPLY_S)
    c.exchange(CONNECT + b"SUB r.1 1\r\n")
    return c


def api(sp: ServerProcess, subject: str, body: bytes, timeout: float = REPLY_S) -> Any:
    """One API request; its JSON reply, or None when none came."""
    with api_client(sp) as c:
        send_api(c, subject, body)
        got = read_msg(c, timeout=timeout, with_headers=True)
    if got is None:
        return None
    if got.startswith(b"NATS/1.0"):  # a status answer (pull requests)
        return {"status": got.split(b"\r\n\r\n", 1)[0].decode(errors="replace")}
    return json.loads(got)


def strip_volatile(doc: Any) -> Any:
    """``doc`` without times and ids (iteratively: replies are shallow)."""
    if isinstance(doc, dict):
        return {k: strip_volatile(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [strip_volatile(v) for v in doc]
    return doc
