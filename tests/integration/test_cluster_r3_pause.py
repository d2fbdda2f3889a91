"""A paused consumer of an R3 stream stays paused through leader changes.

``pause_until`` is part of the consumer's replicated config: after a
``STREAM.LEADER.STEPDOWN`` and after a SIGKILL of the leader, the new leader
reports the same ``paused``/``pause_until``, delivers nothing to a pull
request while paused, and delivers again once resumed (from any node).
``TRIJET_REFERENCE=1`` runs the same test against nats-server.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import nats

from tests.integration.test_cluster_r3_push import (
    REQUEST_TIMEOUT_S,
    LeaderMoves,
    cluster,  # noqa: F401  (fixture)
    retrying,
    stream_leader,
)
from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster


async def api(nc: Any, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else b""
    resp = await retrying(lambda: nc.request(subject, data, timeout=REQUEST_TIMEOUT_S))
    return dict(json.loads(resp.data))


async def paused_info(nc: Any) -> dict[str, Any]:
    """CONSUMER.INFO once a leader answers it (503/10008 during the election)."""
    for _ in range(300):
        doc = await api(nc, "$JS.API.CONSUMER.INFO.PP.D")
        if "error" not in doc:
            return doc
        assert doc["error"]["code"] == 503, doc
        await asyncio.sleep(0.1)
    raise AssertionError("no consumer info")


async def nothing_delivered(js: Any) -> bool:
    psub = await js.pull_subscribe_bind("D", stream="PP")
    try:
        await psub.fetch(1, timeout=1.0)
    except nats.errors.TimeoutError:
        return True
    finally:
        await psub.unsubscribe()
    return False


def test_pause_survives_stepdown_and_leader_kill(cluster: Cluster) -> None:  # noqa: F811
    moves = LeaderMoves(cluster, "PP", ["pp.>"])

    async def body() -> None:
        nc0 = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        _, home, third = await moves.setup(nc0)
        await nc0.close()
        nc = await nats.connect(cluster.urls[cluster.index(home)], error_cb=noop_cb)
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        await js.add_consumer("PP", durable_name="D", ack_policy="explicit")
        await moves.publish(js, "pp.a", 3)
        until = datetime.now(UTC) + timedelta(minutes=5)
        stamp = until.strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
        doc = await api(nc, "$JS.API.CONSUMER.PAUSE.PP.D", {"pause_until": stamp})
        assert doc["paused"] is True, doc
        stamp = doc["pause_until"]  # as the server writes it (trailing zeros cut)
        for step in ("stepdown", "kill"):
            if step == "stepdown":
                await moves.step_down_to(nc, js, third)
            else:
                cluster.kill(cluster.index(third))
                await stream_leader(js, "PP", not_=third)
            info = await paused_info(nc)
            assert info["paused"] is True, (step, info)
            assert info["config"]["pause_until"] == stamp, (step, info)
            assert 0 < info["pause_remaining"] <= 300 * 10**9, (step, info)
            assert await nothing_delivered(js), f"delivered while paused after {step}"
        doc = await api(nc, "$JS.API.CONSUMER.PAUSE.PP.D", {})
        assert doc["paused"] is False, doc
        info = await paused_info(nc)
        assert info.get("paused") in (None, False) and "pause_until" not in info["config"]
        psub = await js.pull_subscribe_bind("D", stream="PP")
        msgs = await psub.fetch(3, timeout=5.0)
        assert [m.metadata.sequence.stream for m in msgs] == [1, 2, 3]
        await nc.close()

    run(body, timeout=180)
