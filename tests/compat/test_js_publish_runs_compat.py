"""A publisher's window in one write (a run of PUBs to one stream subject, each
with its own reply: the run capture, ``Stream.offer_run`` and the batched PubAcks)
answered as the reference answers it: PubAcks in order, a refused publish's error
in its place (``discard: new`` at ``max_msgs``), no answer for a publish without a
reply, and the stream's state afterwards."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support import RawClient, split_ops
from tests.support.servers import ServerProcess, js_pair, reference_binary

pytestmark = pytest.mark.skipif(reference_binary() is None, reason="no reference nats-server")

WAIT_S = 10.0


def _replies(c: RawClient, data: bytes, want: int) -> list[tuple[bytes, object]]:
    """Send ``data``; the (subject, JSON body) of the first ``want`` MSGs (bounded wait)."""
    assert c.send(data)
    deadline = time.monotonic() + WAIT_S
    while True:
        msgs = [op for op in split_ops(c.buf) if op.startswith(b"MSG ")]
        if len(msgs) >= want:
            break
        assert c._recv(deadline), f"only {len(msgs)} of {want} answers"
    c.buf = b""
    got = []
    for op in msgs:
        head, _, body = op.partition(b"\r\n")
        got.append((head.split()[1], json.loads(body)))
    assert len(got) == want, got
    return got


def _scenario(s: ServerProcess) -> list[object]:
    out: list[object] = []
    with RawClient(s.host, s.port, timeout=WAIT_S) as c:
        c.send(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB _INBOX.t.* 1\r\n')
        for name, extra in (("R", {}), ("L", {"max_msgs": 3, "discard": "new"})):
            cfg = json.dumps({"name": name, "subjects": [f"{name.lower()}.>"], **extra})
            req = b"PUB $JS.API.STREAM.CREATE.%s _INBOX.t.c %d\r\n%s\r\n" % (
                name.encode(),
                len(cfg),
                cfg.encode(),
            )
            created = _replies(c, req, 1)[0][1]
            assert isinstance(created, dict) and "error" not in created, created
            subject = f"{name.lower()}.a".encode()
            # a first publish alone (trijet notes the subject's capture), then the window
            out.append(_replies(c, b"PUB %s _INBOX.t.w 1\r\nw\r\n" % subject, 1))
            ops = [
                b"PUB %s %s 5\r\nhello\r\n" % (subject, b"_INBOX.t.%d" % i if i != 4 else b"")
                for i in range(10)
            ]
            data = b"".join(op.replace(b"  ", b" ") for op in ops)
            out.append(_replies(c, data, 9))
            info = _replies(
                c, b"PUB $JS.API.STREAM.INFO.%s _INBOX.t.i 0\r\n\r\n" % name.encode(), 1
            )
            state = info[0][1]["state"]  # type: ignore[index]
            out.append({k: state[k] for k in ("messages", "bytes", "first_seq", "last_seq")})
    return out


def test_a_window_of_publishes_in_one_write_is_answered_as_the_reference(
    tmp_path: Path,
) -> None:
    with js_pair(tmp_path) as (ref, tj):
        assert _scenario(tj) == _scenario(ref)
