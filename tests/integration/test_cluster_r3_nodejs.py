"""nats.js on three server processes: KV, object store and ordered consume
across a SIGKILL of the R3 stream's leader.

Each scenario (``tests/js/cluster.mjs``) works against its R3 asset from
node n1, stops, and the test moves the stream's lead off n1 if needed
(preferred stepdown) and SIGKILLs the leader; the scenario then carries on
through the election.  ``TRIJET_REFERENCE=1`` runs the same assertions
against nats-server.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats

from tests.integration.test_cluster_r3_push import (
    REQUEST_TIMEOUT_S,
    cluster,  # noqa: F401  (fixture)
    stream_leader,
)
from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster
from tests.support.node_js import InteractiveScenario, error_of, requires_node

pytestmark = requires_node

PHASE_TIMEOUT_S = 90.0


def _kill_leader_off_n1(c: Cluster, stream: str, leader: str) -> None:
    """Move ``stream``'s lead off n1 (the client's node) if it is there, then SIGKILL it."""
    if leader == c.names[0]:

        async def move() -> str:
            nc = await nats.connect(c.urls[0], error_cb=noop_cb)
            try:
                js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
                body = json.dumps({"placement": {"preferred": c.names[1]}}).encode()
                resp = await nc.request(
                    f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}", body, timeout=REQUEST_TIMEOUT_S
                )
                assert json.loads(resp.data).get("success") is True, resp.data
                for _ in range(300):
                    now = await stream_leader(js, stream)
                    if now != leader:
                        return now
                    await asyncio.sleep(0.1)
                raise AssertionError("the lead did not move")
            finally:
                await nc.close()

        leader = run(move, timeout=60)
    c.kill(c.index(leader))


def _scenario(c: Cluster, name: str) -> dict[str, Any]:
    with InteractiveScenario("cluster.mjs", c.urls[0], name, timeout=PHASE_TIMEOUT_S) as sc:
        ready = sc.ready()
        _kill_leader_off_n1(c, ready["stream"], ready["leader"])
        return sc.go()


def _e(key: str, value: str | None, rev: int, op: str = "PUT") -> dict[str, Any]:
    return {"key": key, "value": value, "revision": rev, "operation": op}


def test_kv_r3_across_leader_kill(cluster: Cluster) -> None:  # noqa: F811
    out = _scenario(cluster, "kv")
    assert out["replicas"] == 3
    assert (out["put"], out["update"]) == (1, 2)
    for stale in ("stale_update", "create_existing", "stale_after"):
        err = error_of(out[stale])
        assert err is not None and err["err_code"] == 10071, (stale, out[stale])
    assert out["watch_before"] == [_e("w", "before", 5)]
    assert out["get_after"] == _e("a", "2", 2)
    assert out["update_after"] == 6
    assert out["put_after"] == 9
    assert out["keys"] == ["a", "w"]
    assert out["history"] == [_e("a", "1", 1), _e("a", "2", 2), _e("a", "3", 6)]
    assert out["watch_after"] == [
        _e("a", "3", 6),
        _e("b", "", 7, "DEL"),
        _e("c", "", 8, "PURGE"),
        _e("w", "after", 9),
    ]


def test_object_store_r3_10mb_across_leader_kill(cluster: Cluster) -> None:  # noqa: F811
    out = _scenario(cluster, "obj")
    assert out["replicas"] == 3
    assert out["put"] == 10 * 1024 * 1024
    assert out["get_after"] == {"size": 10 * 1024 * 1024, "same": True}
    assert out["put_after"] == 10 * 1024 * 1024
    assert out["get2"] == {"size": 10 * 1024 * 1024, "same": True}
    assert out["list"] == ["big", "big2"]


def test_ordered_consume_r3_across_leader_kill(cluster: Cluster) -> None:  # noqa: F811
    out = _scenario(cluster, "ordered")
    assert out["seqs"] == list(range(1, 101))
    assert out["data_ok"] is True
