"""``/metrics``: Prometheus text from a real trijet-server, parsed back and checked for values.

The scrape is parsed with prometheus_client's own text parser (so the output is
valid exposition format) and the figures are compared with what the test did
through nats-py and with the server's own ``/varz`` and ``/jsz``.  A three-node
cluster checks the Raft families: groups, leaders and replica currency.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.aio import noop_cb, run
from tests.support.cluster import Cluster, start_cluster
from tests.support.servers import ServerProcess, start_server

Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(base: str) -> tuple[str, Samples]:
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
        ctype = resp.headers["Content-Type"]
        text = resp.read().decode()
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return ctype, out


def one(samples: Samples, name: str, **labels: str) -> float:
    hits = [v for lv, v in samples.get(name, []) if all(lv.get(k) == x for k, x in labels.items())]
    assert len(hits) == 1, (name, labels, samples.get(name))
    return hits[0]


def get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return dict(json.loads(resp.read()))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    conf = "http: 127.0.0.1:-1\njetstream {\n  store_dir: {workdir}/js\n  max_file_store: 1000000000\n}\n"
    sp = start_server("trijet", config=conf, workdir=tmp_path)
    try:
        yield sp
    finally:
        sp.stop()


def test_metrics_parse_back_with_values(server: ServerProcess) -> None:
    mon = server.monitoring_url
    assert mon

    async def body() -> None:
        nc = await nats.connect(server.url, error_cb=noop_cb, name="metrics-test")
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(7):
            await js.publish("orders.new", b"order %d" % i)
        sub = await js.pull_subscribe("orders.>", durable="proc")
        msgs = await sub.fetch(3)
        await msgs[0].ack_sync()
        await msgs[1].ack_sync()
        # still connected while scraping: one client connection with a subscription
        ctype, m = scrape(mon)
        assert ctype.startswith("text/plain; version=0.0.4")
        varz = get_json(f"{mon}/varz")
        sid = varz["server_id"]

        # server (exporter names, label server_id)
        assert one(m, "gnatsd_varz_connections", server_id=sid) == 1
        assert one(m, "gnatsd_varz_total_connections", server_id=sid) >= 1
        assert one(m, "gnatsd_varz_in_msgs", server_id=sid) >= 7
        assert one(m, "gnatsd_varz_max_payload", server_id=sid) == varz["max_payload"]
        assert one(m, "gnatsd_varz_server_name", server_id=sid, value=varz["server_name"]) == 1
        assert one(m, "gnatsd_varz_version", server_id=sid, value=varz["version"]) == 1
        assert one(m, "gnatsd_varz_mem", server_id=sid) > 0
        # connections
        assert one(m, "gnatsd_connz_num_connections", server_id=sid) == 1
        assert one(m, "gnatsd_connz_subscriptions", server_id=sid) >= 1
        assert one(m, "gnatsd_connz_in_msgs", server_id=sid) >= 7
        # JetStream server
        assert one(m, "jetstream_server_total_streams", server_id=sid) == 1
        assert one(m, "jetstream_server_total_consumers", server_id=sid) == 1
        assert one(m, "jetstream_server_total_messages", server_id=sid) == 7
        jsz = get_json(f"{mon}/jsz")
        assert one(m, "jetstream_server_total_message_bytes", server_id=sid) == jsz["bytes"]
        assert one(m, "jetstream_server_max_storage", server_id=sid) == 1_000_000_000
        assert one(m, "jetstream_server_jetstream_disabled", server_id=sid) == 0
        # stream
        st = {"stream_name": "ORDERS", "account": "$G", "is_stream_leader": "true"}
        assert one(m, "jetstream_stream_total_messages", **st) == 7
        assert one(m, "jetstream_stream_first_seq", **st) == 1
        assert one(m, "jetstream_stream_last_seq", **st) == 7
        assert one(m, "jetstream_stream_consumer_count", **st) == 1
        assert one(m, "jetstream_stream_total_bytes", **st) == jsz["bytes"]
        # consumer: 3 delivered, 2 acked in order, 4 never delivered
        co = {"stream_name": "ORDERS", "consumer_name": "proc"}
        assert one(m, "jetstream_consumer_delivered_stream_seq", **co) == 3
        assert one(m, "jetstream_consumer_delivered_consumer_seq", **co) == 3
        assert one(m, "jetstream_consumer_num_ack_pending", **co) == 1
        assert one(m, "jetstream_consumer_num_pending", **co) == 4
        assert one(m, "jetstream_consumer_ack_floor_stream_seq", **co) == 2
        assert one(m, "jetstream_consumer_num_redelivered", **co) == 0
        # process collector of prometheus_client
        assert one(m, "process_resident_memory_bytes") > 0
        await nc.close()

    run(body)
    # the scrape is counted like any monitoring request
    assert get_json(f"{mon}/varz")["http_req_stats"]["/metrics"] == 1


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with start_cluster("trijet", workdir=tmp_path) as c:
        yield c


def test_metrics_raft_groups_in_cluster(cluster: Cluster) -> None:
    async def body() -> None:
        nc = await nats.connect(cluster.urls[0], error_cb=noop_cb)
        js = nc.jetstream()
        await js.add_stream(name="R3", subjects=["r3.>"], num_replicas=3)
        for _ in range(5):
            await js.publish("r3.a", b"x")
        await nc.close()

    run(body)
    names = {"n1", "n2", "n3"}

    def replicated(c: Cluster) -> bool:
        leaders = 0
        for i, url in enumerate(c.monitoring_urls):
            _, m = scrape(url)
            if one(m, "jetstream_stream_total_messages", stream_name="R3") != 5:
                return False
            rows = [lv for lv, _ in m.get("trijet_raft_replica_current", [])]
            stream_rows = [lv for lv in rows if lv["stream_name"] == "R3"]
            if {lv["peer_name"] for lv in stream_rows} != names - {c.specs[i].name}:
                return False
            leaders += int(one(m, "trijet_raft_group_leader", stream_name="R3"))
            assert one(m, "trijet_raft_group_size", stream_name="R3") == 3
            assert one(m, "trijet_raft_group_size", group="_meta_") == 3
            assert one(m, "trijet_raft_committed", group="_meta_") >= 1
            leader = {lv["leader"] for lv, _ in m["trijet_jetstream_meta_leader"]}
            assert leader <= names
        return leaders == 1

    cluster.wait_until(replicated, timeout=30.0, what="metrics show R3 on three nodes, one leader")
