"""Damaged stream and consumer directories at start: trijet vs nats-server.

Two streams and two consumers are created on both servers, the servers
stopped, one stream's and one consumer's metadata overwritten with garbage
(trijet: ``config.json``; nats-server: ``meta.inf``), and the servers
started again.  Both must start, serve the undamaged stream and consumer,
and answer ``/healthz`` alike (503 naming the stream while it cannot be
recovered; a damaged consumer does not fail it).  trijet renames the damaged
directories aside (never deletes them).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.hostile.conftest import api, require_reference
from tests.support import ServerProcess, start_server

HTTP_S = 10.0


def _create(sp: ServerProcess) -> None:
    for name, subject in (("S1", "a"), ("S2", "b")):
        body = json.dumps({"name": name, "subjects": [subject]}).encode()
        assert "error" not in api(sp, f"$JS.API.STREAM.CREATE.{name}", body)
    for c in ("C1", "C2"):
        cfg = {"stream_name": "S2", "config": {"durable_name": c, "ack_policy": "explicit"}}
        assert "error" not in api(sp, f"$JS.API.CONSUMER.CREATE.S2.{c}", json.dumps(cfg).encode())


def _damage(kind: str, store: Path, *, stream: bool, consumer: bool) -> None:
    if kind == "trijet":
        targets = [
            *(list(store.rglob("S1/config.json")) if stream else []),
            *(list(store.rglob("S2/consumers/C1/config.json")) if consumer else []),
        ]
    else:
        targets = [
            *(list(store.rglob("streams/S1/meta.inf")) if stream else []),
            *(list(store.rglob("S2/obs/C1/meta.inf")) if consumer else []),
        ]
    assert len(targets) == int(stream) + int(consumer), (kind, targets)
    for f in targets:
        f.write_text('{"config": garbage')


def _healthz(sp: ServerProcess, query: str = "") -> tuple[int, bytes]:
    url = f"{sp.monitoring_url}/healthz{query}"
    try:
        with urllib.request.urlopen(url, timeout=HTTP_S) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.mark.parametrize(
    ("stream", "consumer"), [(True, True), (False, True)], ids=["stream+consumer", "consumer"]
)
def test_start_survives_damaged_directories(tmp_path: Path, stream: bool, consumer: bool) -> None:
    require_reference()
    seen: dict[str, dict[str, object]] = {}
    for kind in ("trijet", "reference"):
        wd = tmp_path / kind
        store = wd / "store"
        args = ["-js", "-sd", str(store), "-m", "-1"]
        sp = start_server(kind, args, workdir=wd)  # type: ignore[arg-type]
        try:
            _create(sp)
        finally:
            sp.stop()
        _damage(kind, store, stream=stream, consumer=consumer)
        sp = start_server(kind, args, workdir=wd)  # type: ignore[arg-type]
        try:
            seen[kind] = {
                "streams": api(sp, "$JS.API.STREAM.NAMES", b"")["streams"],
                "consumers": api(sp, "$JS.API.CONSUMER.NAMES.S2", b"")["consumers"],
                "healthz": _healthz(sp),
                "details": _healthz(sp, "?details=1"),
                "js-enabled-only": _healthz(sp, "?js-enabled-only=1"),
            }
            assert "error" not in api(sp, "$JS.API.STREAM.INFO.S2", b"")
        finally:
            sp.stop()
        if kind == "trijet":
            quarantine = store / "jetstream" / "$G" / "quarantine"
            moved = sorted(p.relative_to(quarantine).parts[0] for p in quarantine.glob("*/*"))
            assert moved == (["consumers", "streams"] if stream else ["consumers"]), moved
            assert all((p / "config.json").exists() for p in quarantine.glob("*/*"))
            log = sp.log_text()
            assert "stream_quarantined" in log or not stream
            assert "consumer_quarantined" in log and "config.json" in log
    assert seen["trijet"] == seen["reference"]
