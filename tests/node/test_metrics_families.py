"""node/monitor/metrics.py's pure conversions: exporter names, labels and leader flags."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from node.monitor.metrics import connz_metrics, jsz_metrics, raft_metrics, varz_metrics

JSZ: dict[str, Any] = {
    "server_id": "NSID",
    "config": {"max_memory": 100, "max_storage": 200, "domain": "hub"},
    "streams": 1,
    "consumers": 1,
    "messages": 7,
    "bytes": 70,
    "meta_cluster": {
        "name": "C1",
        "leader": "n2",
        "replicas": [{"name": "n2", "current": True, "active": 2_000_000_000}],
    },
    "account_details": [
        {
            "name": "$G",
            "id": "$G",
            "stream_detail": [
                {
                    "name": "S",
                    "cluster": {
                        "name": "C1",
                        "raft_group": "S-R3F-abc",
                        "leader": "n3",
                        "replicas": [
                            {"name": "n2", "current": True, "active": 5_000_000},
                            {"name": "n3", "current": False, "active": 0, "lag": 4},
                        ],
                    },
                    "state": {
                        "messages": 7,
                        "bytes": 70,
                        "first_seq": 3,
                        "last_seq": 9,
                        "consumer_count": 1,
                    },
                    "consumer_detail": [
                        {
                            "name": "C",
                            "created": "2026-01-01T00:00:00Z",
                            "config": {"description": "work"},
                            "delivered": {"consumer_seq": 5, "stream_seq": 8},
                            "ack_floor": {"consumer_seq": 4, "stream_seq": 7},
                            "num_ack_pending": 1,
                            "num_redelivered": 2,
                            "num_waiting": 3,
                            "num_pending": 1,
                        }
                    ],
                }
            ],
        }
    ],
}


class _Fixed(Collector):
    def __init__(self, fams: list[Any]) -> None:
        self.fams = fams

    def collect(self) -> Any:
        return iter(self.fams)


def _scrape(fams: list[Any]) -> dict[str, list[tuple[dict[str, str], float]]]:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed(fams))
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def test_jetstream_families_on_a_follower() -> None:
    m = _scrape(list(jsz_metrics("n1", JSZ)))
    ((labels, v),) = m["jetstream_server_total_messages"]
    assert v == 7
    assert labels == {
        "server_id": "NSID",
        "server_name": "n1",
        "cluster": "C1",
        "domain": "hub",
        "meta_leader": "n2",
        "is_meta_leader": "false",
    }
    ((labels, v),) = m["jetstream_stream_first_seq"]
    assert v == 3 and labels["stream_leader"] == "n3" and labels["is_stream_leader"] == "false"
    assert labels["account"] == "$G" and labels["stream_name"] == "S"
    ((labels, v),) = m["jetstream_consumer_ack_floor_stream_seq"]
    assert v == 7 and labels["consumer_desc"] == "work" and labels["is_consumer_leader"] == "true"
    assert m["jetstream_consumer_num_redelivered"][0][1] == 2
    assert m["jetstream_server_max_storage"][0][1] == 200


def test_raft_families() -> None:
    raftz = {"$SYS": {"_meta_": {"term": 4, "committed": 10, "applied": 9}}}
    m = _scrape(list(raft_metrics("NSID", "n1", JSZ, raftz)))
    groups = {lv["group"]: v for lv, v in m["trijet_raft_group_leader"]}
    assert groups == {"_meta_": 0.0, "S-R3F-abc": 0.0}
    lag = {lv["peer_name"]: v for lv, v in m["trijet_raft_replica_lag"]}
    assert lag == {"n3": 4.0}  # only where the leader reports it
    cur = {(lv["group"], lv["peer_name"]): v for lv, v in m["trijet_raft_replica_current"]}
    assert cur == {("_meta_", "n2"): 1.0, ("S-R3F-abc", "n2"): 1.0, ("S-R3F-abc", "n3"): 0.0}
    act = {(lv["group"], lv["peer_name"]): v for lv, v in m["trijet_raft_replica_active_seconds"]}
    assert act[("_meta_", "n2")] == 2.0
    assert m["trijet_raft_term"][0][1] == 4 and m["trijet_raft_applied"][0][1] == 9
    assert m["trijet_jetstream_meta_leader"][0][0]["leader"] == "n2"


def test_varz_and_connz_families() -> None:
    varz = {
        "server_id": "NSID",
        "server_name": "n1",
        "version": "2.11.17",
        "connections": 2,
        "cpu": 1.5,
        "now": "2026-01-01T00:00:00Z",
        "auth_required": True,
    }
    m = _scrape(list(varz_metrics(varz)))
    assert m["gnatsd_varz_connections"] == [({"server_id": "NSID"}, 2.0)]
    assert m["gnatsd_varz_cpu"][0][1] == 1.5
    assert m["gnatsd_varz_version"] == [({"server_id": "NSID", "value": "2.11.17"}, 1.0)]
    assert "gnatsd_varz_now" not in m and "gnatsd_varz_auth_required" not in m  # not numbers
    connz = {
        "num_connections": 2,
        "total": 2,
        "offset": 0,
        "limit": 1024,
        "connections": [{"in_msgs": 3, "out_bytes": 10}, {"in_msgs": 4, "pending_bytes": 5}],
    }
    m = _scrape(list(connz_metrics("NSID", connz)))
    assert m["gnatsd_connz_in_msgs"][0][1] == 7 and m["gnatsd_connz_pending_bytes"][0][1] == 5
    assert m["gnatsd_connz_limit"][0][1] == 1024
