"""Stream features end to end with nats-py, the same scenario against trijet and
the reference nats-server (2.15.1): subject transforms, republish, per-message
TTL (``Nats-TTL``), sealed / deny_delete / deny_purge, first_seq, compression,
per-subject limits, max_age and discard-new errors.

Each test runs once per server kind with one set of expectations, so a
difference from the reference fails the trijet run.  Expiry is awaited by
polling STREAM.INFO against a bounded deadline, never by a fixed sleep.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support import start_server
from tests.support.aio import noop_cb, run
from tests.support.servers import reference_binary

SEC = 1_000_000_000
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")


@pytest.fixture(params=["trijet", "reference"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    srv = start_server(request.param, ["-js", "-sd", str(tmp_path / "store")], workdir=tmp_path)
    try:
        yield srv
    finally:
        srv.stop()


Scenario = Callable[[Any], Awaitable[None]]


def scenario(server: Any, body: Scenario) -> None:
    async def main() -> None:
        nc = await nats.connect(server.url, error_cb=noop_cb)
        try:
            await body(nc)
        finally:
            await nc.close()

    run(main)


async def api(nc: Any, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    msg = await nc.request("$JS.API." + subject, data, timeout=5)
    out: dict[str, Any] = json.loads(msg.data)
    return out


async def pub(nc: Any, subject: str, payload: bytes = b"x", **headers: str) -> dict[str, Any]:
    hdrs = {k.replace("_", "-"): v for k, v in headers.items()} or None
    msg = await nc.request(subject, payload, headers=hdrs, timeout=5)
    out: dict[str, Any] = json.loads(msg.data)
    return out


async def create(nc: Any, **cfg: Any) -> dict[str, Any]:
    r = await api(nc, f"STREAM.CREATE.{cfg['name']}", cfg)
    assert "error" not in r, r
    return r


async def subjects(nc: Any, stream: str) -> dict[str, int]:
    """Stored subjects and their counts (STREAM.INFO ``subjects_filter``)."""
    r = await api(nc, f"STREAM.INFO.{stream}", {"subjects_filter": ">"})
    out: dict[str, int] = r["state"].get("subjects") or {}
    return out


async def state(nc: Any, stream: str) -> dict[str, Any]:
    out: dict[str, Any] = (await api(nc, f"STREAM.INFO.{stream}"))["state"]
    return out


async def wait_state(
    nc: Any, stream: str, pred: Callable[[dict[str, Any]], bool], timeout_s: float = 8.0
) -> dict[str, Any]:
    """Poll STREAM.INFO until ``pred(state)`` holds (bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        st = await state(nc, stream)
        if pred(st) or time.monotonic() > deadline:
            return st
        await asyncio.sleep(0.05)


def err_code(r: dict[str, Any]) -> int | None:
    e = r.get("error")
    return None if e is None else int(e["err_code"])


# --------------------------------------------------------------------------- transforms


def test_subject_transform_stores_the_mapped_subject(server: Any) -> None:
    async def body(nc: Any) -> None:
        r = await create(
            nc,
            name="T",
            subjects=["in.>"],
            subject_transform={"src": "in.*.*", "dest": "out.$2.{{wildcard(1)}}"},
        )
        assert r["config"]["subject_transform"] == {
            "src": "in.*.*",
            "dest": "out.$2.{{wildcard(1)}}",
        }
        assert await pub(nc, "in.a.b") == {"stream": "T", "seq": 1}
        assert await pub(nc, "in.a.b.c") == {"stream": "T", "seq": 2}
        # a subject outside the transform's source is stored as is
        assert await subjects(nc, "T") == {"out.b.a": 1, "in.a.b.c": 1}
        await create(
            nc,
            name="P",
            subjects=["p.*"],
            subject_transform={"src": "p.*", "dest": "q.{{partition(3,1)}}.{{wildcard(1)}}"},
        )
        for k in ("a", "c", "foo"):
            await pub(nc, "p." + k)
        assert await subjects(nc, "P") == {"q.1.a": 1, "q.2.c": 1, "q.0.foo": 1}
        bad = await api(
            nc,
            "STREAM.CREATE.B",
            {"name": "B", "subjects": ["b.*"], "subject_transform": {"src": "b.*", "dest": "c.$2"}},
        )
        assert bad["error"] == {
            "code": 400,
            "err_code": 10156,
            "description": "stream transform: invalid mapping destination: wildcard index"
            " out of range in $2: [2]",
        }

    scenario(server, body)


# --------------------------------------------------------------------------- republish


def test_republish_headers_and_headers_only(server: Any) -> None:
    async def body(nc: Any) -> None:
        got: list[Any] = []
        arrived = asyncio.Event()

        async def cb(m: Any) -> None:
            got.append(m)
            if len(got) == 4:
                arrived.set()

        await nc.subscribe("rp.>", cb=cb)
        await create(
            nc, name="R", subjects=["o.>"], republish={"src": "o.*", "dest": "rp.{{wildcard(1)}}"}
        )
        await create(
            nc,
            name="RH",
            subjects=["h.>"],
            republish={"src": "h.>", "dest": "rp.h.>", "headers_only": True},
        )
        await pub(nc, "o.a", b"hello")
        await pub(nc, "o.a", b"hello2", X_Custom="v", Nats_Msg_Id="m1")
        await pub(nc, "o.a", b"dup", Nats_Msg_Id="m1")  # duplicate: not republished
        await pub(nc, "o.a.deep", b"nope")  # outside src: not republished
        await pub(nc, "h.a", b"body12345", X_Custom="v")
        await pub(nc, "h.b", b"body12345")
        await asyncio.wait_for(arrived.wait(), 5)
        await nc.flush()
        assert [m.subject for m in got] == ["rp.a", "rp.a", "rp.h.a", "rp.h.b"]
        assert [m.data for m in got] == [b"hello", b"hello2", b"", b""]
        for m in got:
            assert TS.match(m.headers.pop("Nats-Time-Stamp"))
        assert [list(m.headers.items()) for m in got] == [
            [
                ("Nats-Stream", "R"),
                ("Nats-Subject", "o.a"),
                ("Nats-Sequence", "1"),
                ("Nats-Last-Sequence", "0"),
            ],
            [
                ("X-Custom", "v"),
                ("Nats-Msg-Id", "m1"),
                ("Nats-Stream", "R"),
                ("Nats-Subject", "o.a"),
                ("Nats-Sequence", "2"),
                ("Nats-Last-Sequence", "1"),
            ],
            [
                ("X-Custom", "v"),
                ("Nats-Stream", "RH"),
                ("Nats-Subject", "h.a"),
                ("Nats-Sequence", "1"),
                ("Nats-Last-Sequence", "0"),
                ("Nats-Msg-Size", "9"),
            ],
            [
                ("Nats-Stream", "RH"),
                ("Nats-Subject", "h.b"),
                ("Nats-Sequence", "2"),
                ("Nats-Last-Sequence", "0"),
                ("Nats-Msg-Size", "9"),
            ],
        ]

    scenario(server, body)


# --------------------------------------------------------------------------- per-message TTL


def test_msg_ttl_expires_without_max_age(server: Any) -> None:
    async def body(nc: Any) -> None:
        await create(nc, name="D", subjects=["d.>"])
        assert err_code(await pub(nc, "d.a", Nats_TTL="1s")) == 10166
        assert err_code(await pub(nc, "d.a", Nats_TTL="bogus")) == 10165
        await create(nc, name="E", subjects=["e.>"], allow_msg_ttl=True)
        for bad in ("0", "500ms", "1e3", "-1s"):
            assert err_code(await pub(nc, "e.a", Nats_TTL=bad)) == 10165, bad
        assert await pub(nc, "e.a", b"1", Nats_TTL="1s") == {"stream": "E", "seq": 1}
        await pub(nc, "e.b", b"2", Nats_TTL="NEVER")
        await pub(nc, "e.c", b"3")
        st = await wait_state(nc, "E", lambda s: s["messages"] == 2)
        assert (st["messages"], st["first_seq"], st["last_seq"]) == (2, 2, 3)
        assert await subjects(nc, "E") == {"e.b": 1, "e.c": 1}

    scenario(server, body)


def test_msg_ttl_alongside_max_age(server: Any) -> None:
    async def body(nc: Any) -> None:
        await create(nc, name="M", subjects=["m.>"], allow_msg_ttl=True, max_age=SEC)
        await pub(nc, "m.never", Nats_TTL="never")
        await pub(nc, "m.long", Nats_TTL="60s")  # max_age still removes it
        await pub(nc, "m.plain")
        st = await wait_state(nc, "M", lambda s: s["messages"] == 1)
        assert (st["messages"], st["first_seq"], st["num_deleted"]) == (1, 1, 2)
        assert await subjects(nc, "M") == {"m.never": 1}

    scenario(server, body)


# --------------------------------------------------------------------------- config behaviours


def test_sealed_deny_delete_deny_purge(server: Any) -> None:
    async def body(nc: Any) -> None:
        r = await api(nc, "STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "sealed": True})
        assert err_code(r) == 10052
        base = {"name": "S", "subjects": ["s.>"]}
        await create(nc, **base, deny_delete=True, deny_purge=True)
        await pub(nc, "s.a")
        await pub(nc, "s.a")
        r = await api(nc, "STREAM.PURGE.S")
        assert r["error"] == {
            "code": 500,
            "err_code": 10110,
            "description": "stream purge not permitted",
        }
        r = await api(nc, "STREAM.UPDATE.S", {**base, "deny_delete": False, "deny_purge": True})
        assert err_code(r) == 10052
        r = await api(
            nc, "STREAM.UPDATE.S", {**base, "deny_delete": True, "deny_purge": True, "sealed": True}
        )
        cfg = r["config"]
        assert (cfg["sealed"], cfg["deny_delete"], cfg["deny_purge"], cfg["discard"]) == (
            True,
            True,
            True,
            "new",
        )
        r = await pub(nc, "s.a")
        assert r["error"] == {
            "code": 400,
            "err_code": 10109,
            "description": "invalid operation on sealed stream",
        }
        r = await api(nc, "STREAM.UPDATE.S", {**base, "deny_delete": True, "deny_purge": True})
        assert err_code(r) == 10052  # can not unseal
        assert (await state(nc, "S"))["messages"] == 2

    scenario(server, body)


def test_first_seq_compression_metadata(server: Any) -> None:
    async def body(nc: Any) -> None:
        r = await create(
            nc, name="F", subjects=["f.>"], first_seq=100, compression="s2", metadata={"k": "v"}
        )
        cfg = r["config"]
        assert (cfg["first_seq"], cfg["compression"], cfg["metadata"]["k"]) == (100, "s2", "v")
        assert r["state"]["first_seq"] == 100
        assert await pub(nc, "f.a") == {"stream": "F", "seq": 100}
        st = await state(nc, "F")
        assert (st["first_seq"], st["last_seq"], st["messages"]) == (100, 100, 1)
        info = await api(nc, "STREAM.INFO.F")
        assert info["config"]["metadata"]["k"] == "v"

    scenario(server, body)


def test_limits_per_subject_discard_new_and_max_bytes(server: Any) -> None:
    async def body(nc: Any) -> None:
        await create(nc, name="K", subjects=["k.>"], max_msgs_per_subject=2)
        for i in range(4):
            await pub(nc, "k.a", b"%d" % i)
        st = await state(nc, "K")
        assert (st["messages"], st["first_seq"]) == (2, 3)
        await create(
            nc,
            name="N",
            subjects=["n.>"],
            discard="new",
            max_msgs_per_subject=1,
            discard_new_per_subject=True,
        )
        await pub(nc, "n.a")
        r = await pub(nc, "n.a")
        assert r["error"] == {
            "code": 503,
            "err_code": 10077,
            "description": "maximum messages per subject exceeded",
        }
        await create(nc, name="Y", subjects=["y.>"], discard="new", max_bytes=100)
        assert "error" not in await pub(nc, "y.a", b"x" * 40)
        r = await pub(nc, "y.a", b"x" * 40)
        assert r["error"] == {
            "code": 503,
            "err_code": 10077,
            "description": "maximum bytes exceeded",
        }
        await create(nc, name="Z", subjects=["z.>"], discard="new", max_msgs=1)
        await pub(nc, "z.a")
        r = await pub(nc, "z.a")
        assert r["error"] == {
            "code": 503,
            "err_code": 10077,
            "description": "maximum messages exceeded",
        }
        await create(nc, name="A", subjects=["a.>"], max_age=SEC)
        await pub(nc, "a.a")
        st = await wait_state(nc, "A", lambda s: s["messages"] == 0)
        assert (st["messages"], st["first_seq"], st["last_seq"]) == (0, 2, 1)

    scenario(server, body)
