"""Differential: the JetStream account's limits (``jetstream: {max_mem, max_file, max_streams,
max_consumers}`` in an account, reached through ``no_auth_user``), trijet and nats-server
side by side, every answer compared: the shape of nats.py's account-limits test."""

from __future__ import annotations

import json
from typing import Any

import nats
import pytest

from tests.support import ServerProcess, reference_binary
from tests.support.aio import ErrorLog, run

CONF = """
jetstream { store_dir: "{workdir}/js" }
accounts {
  APP: {
    users: [{user: app, password: app}]
    jetstream: { max_mem: 1M, max_file: 2M, max_streams: 2, max_consumers: 2 }
  }
}
no_auth_user: app
"""


async def scenario(sp: ServerProcess) -> list[Any]:
    nc = await nats.connect(sp.url, error_cb=ErrorLog().cb)
    out: list[Any] = []

    async def req(subject: str, body: Any) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        doc = json.loads((await nc.request(subject, data, timeout=5)).data)
        if "error" in doc:
            out.append(("error", doc["type"], doc["error"]))
        else:
            out.append(("ok", doc["type"], doc.get("limits")))

    try:
        await req("$JS.API.INFO", None)
        await req(
            "$JS.API.STREAM.CREATE.S1", {"name": "S1", "subjects": ["s1"], "storage": "memory"}
        )
        await req(
            "$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": ["s2"], "max_bytes": 3000000}
        )
        await req(
            "$JS.API.STREAM.CREATE.S2",
            {"name": "S2", "subjects": ["s2"], "storage": "memory", "max_bytes": 2000000},
        )
        await req(
            "$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": ["s2"], "max_bytes": 1500000}
        )
        await req("$JS.API.STREAM.CREATE.S3", {"name": "S3", "subjects": ["s3"]})
        await req(
            "$JS.API.STREAM.UPDATE.S2", {"name": "S2", "subjects": ["s2"], "max_bytes": 2500000}
        )
        for i in range(3):
            cfg = {"durable_name": f"D{i}", "ack_policy": "explicit"}
            await req(f"$JS.API.CONSUMER.CREATE.S1.D{i}", {"stream_name": "S1", "config": cfg})
        # D0 again (an update of an existing consumer): not a new one
        cfg = {"durable_name": "D0", "ack_policy": "explicit"}
        await req("$JS.API.CONSUMER.CREATE.S1.D0", {"stream_name": "S1", "config": cfg})
        stored = 0
        for _ in range(12):
            ack = json.loads((await nc.request("s1", b"x" * 100000, timeout=5)).data)
            if "error" in ack:
                out.append(("puback", stored, ack))
                break
            stored += 1
        await nc.flush()
    finally:
        await nc.close()
    return out


def test_account_limits_as_reference(start_server: Any) -> None:
    if reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    got = {}
    for kind in ("reference", "trijet"):
        sp = start_server(kind, config=CONF)
        got[kind] = run(lambda sp=sp: scenario(sp))
    for ref, ours in zip(got["reference"], got["trijet"], strict=True):
        assert ours == ref
    ref = got["reference"]
    assert ref[0][2]["max_memory"] == 1000000 and ref[0][2]["max_streams"] == 2
    assert ref[-1] == (
        "puback",
        9,
        {
            "error": {
                "code": 400,
                "err_code": 10002,
                "description": "resource limits exceeded for account",
            },
            "stream": "S1",
            "seq": 0,
        },
    )
