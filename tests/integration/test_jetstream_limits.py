"""Server storage limits, ``sync_interval`` reporting, subject delete markers and
the ``Nats-Stream-Source`` publish check: the same scenarios against the
reference nats-server 2.15.1 and trijet, answers compared (``tests.support.jsdiff``
normalisation: timestamps and server names only)."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support import start_server
from tests.support.aio import noop_cb, run
from tests.support.jsdiff import Pair, Req, normalise_text
from tests.support.servers import reference_binary

pytestmark = pytest.mark.skipif(reference_binary() is None, reason="no reference nats-server")

LIMITS_CONF = (
    "jetstream { store_dir: '{workdir}/store', max_file_store: 1MB, max_memory_store: 1MB }\n"
)
KIB_100 = b"x" * 102400
WAIT_S = 10.0


def _hdr(*fields: tuple[str, str]) -> bytes:
    return ("NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields) + "\r\n").encode()


def _create(name: str, **cfg: Any) -> Req:
    return Req(f"$JS.API.STREAM.CREATE.{name}", json.dumps({"name": name, **cfg}))


def _update(name: str, **cfg: Any) -> Req:
    return Req(f"$JS.API.STREAM.UPDATE.{name}", json.dumps({"name": name, **cfg}))


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Both servers with ``max_file_store: 1MB, max_memory_store: 1MB``."""
    tmp = tmp_path_factory.mktemp("limits")
    ref = start_server("reference", config=LIMITS_CONF, workdir=tmp / "ref")
    try:
        tj = start_server("trijet", config=LIMITS_CONF, workdir=tmp / "tj")
    except BaseException:
        ref.stop()
        raise
    pair = Pair(ref, tj)
    try:
        yield pair
    finally:
        pair.stop()


def _same(pair: Pair, steps: list[Req]) -> list[str]:
    ref, tj = pair.exchange(steps)
    for i, (a, b) in enumerate(zip(ref, tj, strict=True)):
        assert a == b, (i, steps[i].subject, a, b)
    return tj


# --------------------------------------------------------------------------- reservations


def test_reservations_at_create_and_update(limited: Pair) -> None:
    limited.reset()
    steps = [
        _create("A", subjects=["a"], max_bytes=600000),
        _create("B", subjects=["b"], max_bytes=448577),  # one byte too many
        _create("B", subjects=["b"], max_bytes=448576),  # exactly the limit
        _create("C", subjects=["c"]),  # no max_bytes: needs one byte, none left
        _create("M", subjects=["m"], storage="memory", max_bytes=2000000),
        _create("M", subjects=["m"], storage="memory", max_bytes=1048576),
        _create("M2", subjects=["m2"], storage="memory", max_bytes=1),
        _create("A", subjects=["a"], max_bytes=600000),  # identical re-create: fine
        Req("$JS.API.INFO"),
        _update("A", subjects=["a"], max_bytes=700000),
        _update("A", subjects=["a"], max_bytes=500000),
        _update("A", subjects=["a"], max_bytes=600001),
        _update("A", subjects=["a"], max_bytes=600000),
        _update("A", subjects=["a"], max_bytes=-1),
        Req("$JS.API.INFO"),
        _create("C", subjects=["c"]),
    ]
    out = _same(limited, steps)
    assert '"err_code":10047' in out[1] and '"err_code":10028' in out[4]
    assert '"reserved_storage":1048576' in out[8]


# --------------------------------------------------------------------------- usage


@pytest.mark.parametrize("storage", ["file", "memory"])
def test_publishes_refused_above_the_limit_until_room_is_made(limited: Pair, storage: str) -> None:
    limited.reset()
    steps = [_create("D", subjects=["d"], storage=storage)]
    steps += [Req("d", KIB_100) for _ in range(13)]
    steps += [
        _create("E", subjects=["e"], storage=storage),
        _create("F", subjects=["f"], storage=storage, max_bytes=1000),  # reservation fits
        Req("e", "small"),
        Req("e", "small", headers=_hdr(("Nats-Msg-Id", "x"))),
        Req("$JS.API.INFO"),
        Req("$JS.API.STREAM.PURGE.D"),
        Req("e", "small"),
        Req("$JS.API.INFO"),
    ]
    out = _same(limited, steps)
    assert out[11] == '{"stream":"D","seq":11}'
    refused = '{"error":{"code":503,"err_code":10023,"description":"insufficient resources"},'
    assert out[12] == refused + '"stream":"D","seq":0}'
    assert out[16].startswith(refused)
    assert out[20] == '{"stream":"E","seq":1}'


# --------------------------------------------------------------------------- Nats-Stream-Source


def test_client_stream_source_header_refused(limited: Pair) -> None:
    limited.reset()
    src = ("Nats-Stream-Source", "X 1 s.e")
    steps = [
        _create("S", subjects=["s.>"], allow_rollup_hdrs=True, allow_msg_ttl=True),
        Req("s.e", "z", headers=_hdr(src)),
        Req("s.e", "z", headers=_hdr(("Nats-Msg-Id", "m1"))),
        Req("s.e", "z", headers=_hdr(src, ("Nats-Msg-Id", "m1"))),
        Req("s.e", "z", headers=_hdr(src, ("Nats-Expected-Last-Sequence", "99"))),
        Req("s.e", "z", headers=_hdr(("Nats-Msg-Id", "m1"), ("Nats-Expected-Last-Sequence", "9"))),
        Req("s.e", "z", headers=_hdr(src, ("Nats-Rollup", "bogus"))),
        Req("s.e", "z", headers=_hdr(src, ("Nats-TTL", "bogus"))),
        Req("s.e", "z", headers=_hdr(("Nats-Stream-Source", ""))),
        Req("$JS.API.STREAM.MSG.GET.S", '{"seq":2}'),
    ]
    out = _same(limited, steps)
    assert out[1] == (
        '{"error":{"code":400,"err_code":10227,'
        '"description":"message stream source header is not allowed"},"stream":"S","seq":0}'
    )


# --------------------------------------------------------------------------- sync_interval


def _jetstream_config(kind: str, conf: str, workdir: Path) -> dict[str, Any]:
    server = start_server(kind, ["-m", "-1"], config=conf, workdir=workdir)
    try:
        with urllib.request.urlopen(server.monitoring_url + "/varz", timeout=WAIT_S) as resp:
            cfg: dict[str, Any] = json.load(resp)["jetstream"]["config"]
    finally:
        server.stop()
    for k in ("store_dir", "max_memory", "max_storage"):
        cfg[k] = "<v>"
    return cfg


@pytest.mark.parametrize(
    ("setting", "want"),
    [
        ("sync_interval: 5s", {"sync_interval": 5_000_000_000}),
        ("sync_interval: always", {"sync_interval": 120_000_000_000, "sync_always": True}),
        ("sync: 2m", {"sync_interval": 2_000_000 * 1_000_000_000}),  # unquoted 2m is 2e6 (s)
    ],
)
def test_sync_interval_reported_as_the_reference(
    tmp_path: Path, setting: str, want: dict[str, Any]
) -> None:
    conf = "jetstream { store_dir: '{workdir}/store', " + setting + " }\n"
    ref = _jetstream_config("reference", conf, tmp_path / "ref")
    tj = _jetstream_config("trijet", conf, tmp_path / "tj")
    assert tj == ref
    assert {k: v for k, v in tj.items() if k.startswith("sync")} == want


# --------------------------------------------------------------------------- markers


async def _marker_scenario(url: str) -> list[str]:
    """Publish, wait for the markers through ``republish`` (an event, not a
    poll), then read the stream: normalised answers."""
    nc = await nats.connect(url, error_cb=noop_cb)
    out: list[str] = []
    try:
        republished: asyncio.Queue[Any] = asyncio.Queue()

        async def on_msg(msg: Any) -> None:
            await republished.put(msg)

        await nc.subscribe("rp.>", cb=on_msg)

        async def req(subject: str, body: bytes = b"", headers: Any = None) -> str:
            msg = await nc.request(subject, body, timeout=WAIT_S, headers=headers)
            return normalise_text(msg.data.decode())

        cfg = {
            "name": "S",
            "subjects": ["s.>"],
            "allow_msg_ttl": True,
            "allow_rollup_hdrs": True,
            "subject_delete_marker_ttl": 2_000_000_000,
            "max_age": 3_000_000_000,
            "republish": {"src": "s.>", "dest": "rp.>"},
        }
        out.append(await req("$JS.API.STREAM.CREATE.S", json.dumps(cfg).encode()))
        out.append(await req("s.a", b"x", {"Nats-TTL": "1s"}))  # stored with Nats-TTL: 2
        out.append(await req("s.b", b"y"))
        out.append(await req("s.b", b"y2"))
        out.append(await req("s.f", b"f", {"Nats-Marker-Reason": "Foo"}))  # no marker for it
        # s.c is the last publish: its marker (the last one awaited below) comes when
        # max_age removes it, and both servers remove the oldest first, so the reads
        # below see every publish gone (with s.f last, its own max_age removal raced
        # the reads by the milliseconds between the two publishes). Its TTL (4 s)
        # outlives max_age, which wins; the markers' own TTL (2 s) outlives the reads.
        out.append(await req("s.c", b"z", {"Nats-TTL": "4"}))
        seen = []
        while len(seen) < 5 + 3:  # the 5 publishes, then markers for s.a, s.b, s.c
            msg = await asyncio.wait_for(republished.get(), WAIT_S)
            seen.append(msg)
        for msg in seen:
            hdrs = {k: v for k, v in (msg.headers or {}).items() if k != "Nats-Time-Stamp"}
            out.append(f"{msg.subject} {sorted(hdrs.items())} {msg.data!r}")
        for seq in range(1, 9):
            out.append(await req("$JS.API.STREAM.MSG.GET.S", b'{"seq":%d}' % seq))
    finally:
        await nc.close()
    return out


def test_subject_delete_markers_as_the_reference(tmp_path: Path) -> None:
    got = {}
    for kind in ("reference", "trijet"):
        args = ["-js", "-sd", str(tmp_path / kind / "store")]
        server = start_server(kind, args, workdir=tmp_path / kind)
        try:
            got[kind] = run(lambda url=server.url: _marker_scenario(url), timeout=40)
        finally:
            server.stop()
    ref, tj = got["reference"], got["trijet"]
    for i, (a, b) in enumerate(zip(ref, tj, strict=True)):
        assert a == b, (i, a, b)
    assert "Nats-Marker-Reason" in tj[5 + 1 + 5]  # the first marker, republished
    assert tj[-1].count("no message found") == 0  # seq 8: the marker of s.c
