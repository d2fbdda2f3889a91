"""tests/support/cluster.py against the reference: a three-node JetStream cluster forms,
its nodes agree on the meta leader, an R3 stream is created, and killing the meta leader
yields a new one (reference ``jetstream-cluster.md`` §6.6: ~4.4-5.5 s)."""

from __future__ import annotations

from pathlib import Path

import nats
import pytest

from tests.support import reference_binary
from tests.support.aio import noop_cb, run
from tests.support.cluster import REFERENCE_TAGS, start_cluster

needs_reference = pytest.mark.skipif(reference_binary() is None, reason="nats-server not installed")


@needs_reference
def test_reference_cluster_forms_places_r3_and_fails_over(tmp_path: Path) -> None:
    with start_cluster("reference", tags=REFERENCE_TAGS, workdir=tmp_path) as c:
        leaders = {c.jsz_meta_leader(i) for i in range(3)}
        assert len(leaders) == 1 and leaders <= {"n1", "n2", "n3"}
        leader = c.meta_leader()
        assert leader in leaders
        survivor = next(i for i in range(3) if c.names[i] != leader)

        async def create() -> dict[str, object]:
            nc = await nats.connect(c.urls[survivor], error_cb=noop_cb)
            try:
                js = nc.jetstream(timeout=5)
                info = await js.add_stream(name="ORDERS", subjects=["orders.>"], num_replicas=3)
                return {"replicas": info.config.num_replicas, "cluster": info.cluster}
            finally:
                await nc.close()

        got = run(create, timeout=15)
        assert got["replicas"] == 3
        cluster = got["cluster"]
        assert cluster is not None and cluster.name == "C1" and len(cluster.replicas) == 2

        c.kill(c.index(leader))
        new = c.wait_new_meta_leader(leader, timeout=15)
        assert new != leader and new in c.live_names()


def test_trijet_cluster_forms_and_a_node_restarts(tmp_path: Path) -> None:
    """Until trijet's meta group lands, "formed" for trijet means routes to every node."""
    with start_cluster(
        "trijet", tags=REFERENCE_TAGS, unique_tag="az:", sync_always=True, workdir=tmp_path
    ) as c:
        assert c.live_names() == {"n1", "n2", "n3"}
        conf = c.specs[1].config
        assert 'server_tags: ["az:2"]' in conf and "sync_interval: always" in conf
        c.kill(1)
        assert c.live_indexes() == [0, 2]
        c.restart(1)
        assert c.live_indexes() == [0, 1, 2]
