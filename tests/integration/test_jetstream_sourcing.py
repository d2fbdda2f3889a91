"""Mirrors and sources end to end with nats-py, on trijet and the reference server.

The differential test runs one scenario on both servers and compares the
StreamInfo ``state``/``mirror``/``sources`` modulo volatile fields (times,
``active`` values).  ``bytes`` is compared too: it counts every header byte,
so it pins the ``Nats-Stream-Source`` header's exact form (the identity hash
has the same length on both).  Copying is asynchronous on both servers, so
the tests wait for a stream's info to reach the expected state by asking
again (bounded), never by sleeping a fixed time.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import StreamSource, SubjectTransform

from tests.support import reference_binary, start_server
from tests.support.aio import noop_cb, run, with_client

WAIT_S = 15.0
VOLATILE = {"created", "ts", "first_ts", "last_ts", "cluster", "metadata", "did_create"}


def _clean(d: Any) -> Any:
    if isinstance(d, dict):
        out = {k: _clean(v) for k, v in d.items() if k not in VOLATILE}
        if isinstance(out.get("active"), int) and out["active"] >= 0:
            out["active"] = "seen"
        return out
    if isinstance(d, list):
        return [_clean(x) for x in d]
    return d


def _comparable(info: Any) -> Any:
    """``_clean`` plus ``sources`` in a fixed order (nats-server lists them in
    Go map order, which varies from run to run)."""
    out = _clean(info)
    if isinstance(out, dict) and isinstance(out.get("sources"), list):
        out["sources"] = sorted(out["sources"], key=lambda s: json.dumps(s, sort_keys=True))
    return out


async def _api(nc: Any, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else b""
    reply = await nc.request(subject, data, timeout=5)
    doc: dict[str, Any] = json.loads(reply.data)
    return doc


async def _info_when(nc: Any, name: str, ok: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """STREAM.INFO of ``name`` once ``ok(info)`` holds (asked again until ``WAIT_S``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        info = await _api(nc, "$JS.API.STREAM.INFO." + name)
        if ok(info) or loop.time() > deadline:
            return info
        await asyncio.sleep(0.05)


def _last(n: int) -> Callable[[dict[str, Any]], bool]:
    return lambda i: bool(i.get("state", {}).get("last_seq", 0) >= n)


def _scenario(url: str) -> list[Any]:
    async def main() -> list[Any]:
        nc = await nats.connect(url, error_cb=noop_cb)
        js = nc.jetstream()
        out: list[Any] = []
        try:
            await js.add_stream(name="O", subjects=["o.>"], max_msgs_per_subject=1)
            subjects = ["o.b", "o.a", "o.c", "o.a"]
            for i in range(1, 9):
                hdrs = {"Nats-Msg-Id": f"id{i % 5}", "Nats-Expected-Stream": "O", "X": "y"}
                await js.publish(subjects[i % 4], b"m%d" % i, headers=hdrs)
            creates = [
                {"name": "M", "mirror": {"name": "O"}},
                {"name": "MF", "mirror": {"name": "O", "filter_subject": "o.a"}},
                {
                    "name": "MT",
                    "mirror": {
                        "name": "O",
                        "subject_transforms": [{"src": "o.*", "dest": "t.$1"}],
                    },
                },
                {"name": "M2", "mirror": {"name": "O", "opt_start_seq": 4}, "max_msgs": 1},
                {
                    "name": "S",
                    "subjects": ["s.>"],
                    "sources": [
                        {"name": "O", "filter_subject": "o.a"},
                        {"name": "O", "subject_transforms": [{"src": "o.b", "dest": "t.b"}]},
                        {"name": "MISSING"},
                    ],
                },
                {"name": "S2", "sources": [{"name": "O", "opt_start_seq": 7}]},
            ]
            for body in creates:
                resp = await _api(nc, "$JS.API.STREAM.CREATE." + body["name"], body)
                out.append(_comparable(resp))
            for name in ("M", "MF", "MT", "M2"):
                out.append(_comparable(await _info_when(nc, name, _last(5))))
            out.append(
                _comparable(
                    await _info_when(
                        nc,
                        "S",
                        lambda i: (
                            # o.a and o.b once each (the msg-ids and per-subject limit keep
                            # O at seqs 2, 4, 5); MISSING shows its error
                            i["state"]["messages"] >= 2 and any("error" in x for x in i["sources"])
                        ),
                    )
                )
            )
            out.append(
                _comparable(await _info_when(nc, "S2", lambda i: "active" in i["sources"][0]))
            )
            await js.publish("o.c", b"late")
            out.append(_comparable(await _info_when(nc, "M", _last(6))))
            # O's "late" is seq 6, before S2's start at 7: S2 stays empty (both servers)
            await _info_when(nc, "O", _last(6))
            out.append(
                _comparable(await _info_when(nc, "S2", lambda i: "active" in i["sources"][0]))
            )
        finally:
            await nc.close()
        return out

    return run(main)


@pytest.mark.skipif(reference_binary() is None, reason="reference nats-server not available")
def test_mirrors_and_sources_match_the_reference(tmp_path: Path) -> None:
    results = {}
    for kind in ("reference", "trijet"):
        server = start_server(
            kind, ["-js", "-sd", str(tmp_path / kind / "store")], workdir=tmp_path / kind
        )
        try:
            results[kind] = _scenario(server.url)
        finally:
            server.stop()
    for ref, ours in zip(results["reference"], results["trijet"], strict=True):
        assert ours == ref
    # the scenario really copied: the mirror holds the origin's numbering
    m_info = results["trijet"][6]
    assert m_info["state"]["first_seq"] >= 1 and m_info["state"]["num_deleted"] > 0


def test_restart_resumes_without_duplicates_or_gaps(tmp_path: Path) -> None:
    store = tmp_path / "store"
    server = start_server("trijet", ["-js", "-sd", str(store)], workdir=tmp_path / "srv1")

    async def first() -> None:
        nc = await nats.connect(server.url, error_cb=noop_cb)
        js = nc.jetstream()
        await js.add_stream(name="O", subjects=["o.>"])
        await js.add_stream(name="M", mirror=StreamSource(name="O"))
        await js.add_stream(
            name="S",
            sources=[
                StreamSource(name="O", filter_subject="o.a"),
                StreamSource(
                    name="O",
                    subject_transforms=[SubjectTransform(src="o.b", dest="b.t")],
                ),
            ],
        )
        for i in range(40):
            await js.publish("o.a" if i % 2 else "o.b", b"v%d" % i)
        await _info_when(nc, "M", _last(40))
        await _info_when(nc, "S", _last(40))
        await nc.close()

    try:
        run(first)
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(10)
    server = start_server("trijet", ["-js", "-sd", str(store)], workdir=tmp_path / "srv2")

    async def second() -> tuple[dict[str, Any], dict[str, Any]]:
        nc = await nats.connect(server.url, error_cb=noop_cb)
        js = nc.jetstream()
        for i in range(40, 60):
            await js.publish("o.a" if i % 2 else "o.b", b"v%d" % i)
        m = await _info_when(nc, "M", _last(60))
        s = await _info_when(nc, "S", _last(60))
        # nothing more arrives: a second look shows the same state
        await js.publish("o.zz", b"not sourced by S")
        m2 = await _info_when(nc, "M", _last(61))
        s2 = await _api(nc, "$JS.API.STREAM.INFO.S")
        assert s2["state"] == s["state"]
        assert m2["state"]["messages"] == 61
        await nc.close()
        return m, s

    try:
        m, s = run(second)
    finally:
        server.stop()
    assert (m["state"]["messages"], m["state"]["first_seq"], m["state"]["last_seq"]) == (60, 1, 60)
    assert (s["state"]["messages"], s["state"]["last_seq"]) == (60, 60)
    assert sorted(x["seq"] for x in s["sources"]) == [59, 60]
    assert s["state"]["num_subjects"] == 2  # o.a and the transformed b.t


def test_origin_deleted_and_recreated(tmp_path: Path) -> None:
    server = start_server("trijet", ["-js", "-sd", str(tmp_path / "store")], workdir=tmp_path)

    async def main(nc: Any) -> None:
        js = nc.jetstream()
        await js.add_stream(name="O", subjects=["o.>"])
        await js.add_stream(name="M", mirror=StreamSource(name="O"))
        await js.add_stream(name="S", sources=[StreamSource(name="O")])
        for i in range(5):
            await js.publish("o.x", b"%d" % i)
        await _info_when(nc, "M", _last(5))
        await _info_when(nc, "S", _last(5))
        await js.delete_stream("O")
        info = await _info_when(nc, "M", lambda i: "error" in i["mirror"])
        assert info["mirror"]["error"] == {
            "code": 404,
            "err_code": 10059,
            "description": "stream not found",
        }
        await js.add_stream(name="O", subjects=["o.>"])
        for i in range(7):
            await js.publish("o.y", b"new%d" % i)
        # the mirror ignores what it already has (seqs 1..5) and takes 6, 7
        m = await _info_when(nc, "M", _last(7))
        assert (m["state"]["messages"], m["state"]["last_seq"]) == (7, 7)
        assert "error" not in m["mirror"]
        # the source sees a new identity and copies the new origin from its start
        s = await _info_when(nc, "S", _last(12))
        assert (s["state"]["messages"], s["sources"][0]["seq"]) == (12, 7)

    with_client(server, main)
