"""``/metrics``: the server's state in Prometheus text format, via prometheus_client.

Theory of operation: :class:`ServerCollector` is a prometheus_client custom
collector whose ``collect()`` reads the same pure endpoint documents the JSON
monitor serves (``/varz``, ``/connz``, ``/jsz``, ``/raftz``) at scrape time and
turns them into metric families; nothing is counted twice and nothing is
hand-formatted (``prometheus_client.generate_latest`` writes the text).  Names
follow the prometheus-nats-exporter, so dashboards built for it work unchanged
against a trijet node scraped directly:

* ``gnatsd_varz_<key>{server_id}``: every numeric top-level ``/varz`` field
  (connections, total_connections, in_msgs, out_bytes, slow_consumers,
  subscriptions, mem, cpu, routes, …), plus ``gnatsd_varz_server_name`` and
  ``gnatsd_varz_version`` as ``{server_id,value}`` = 1, as the exporter does.
* ``gnatsd_connz_{num_connections,total,offset,limit,pending_bytes,subscriptions,
  in_bytes,out_bytes,in_msgs,out_msgs}{server_id}``: the exporter's sums over the
  first ``/connz`` page.
* ``jetstream_server_{jetstream_disabled,total_streams,total_consumers,
  total_messages,total_message_bytes,max_memory,max_storage}`` with labels
  ``server_id, server_name, cluster, domain, meta_leader, is_meta_leader``;
  ``jetstream_stream_{total_messages,total_bytes,first_seq,last_seq,consumer_count}``
  adding ``account, account_id, stream_name, stream_leader, is_stream_leader``;
  ``jetstream_consumer_{delivered_consumer_seq,delivered_stream_seq,num_ack_pending,
  num_redelivered,num_waiting,num_pending,ack_floor_stream_seq,ack_floor_consumer_seq}``
  adding ``consumer_name, consumer_leader, is_consumer_leader, consumer_desc,
  consumer_created``.  The exporter reports every one of these as a gauge.
* Raft (no exporter names exist; ``trijet_`` prefix): per group this node runs
  (the meta group ``_meta_`` and each replicated stream or consumer group)
  ``trijet_raft_group_leader`` (1 when this node leads), ``trijet_raft_group_size``,
  and per peer ``trijet_raft_replica_current`` (1/0), ``trijet_raft_replica_active_seconds``
  (since last heard) and ``trijet_raft_replica_lag`` (entries behind, when known);
  for the meta group also ``trijet_raft_term``, ``trijet_raft_committed``,
  ``trijet_raft_applied``.  ``trijet_jetstream_meta_leader{server_id,leader}`` is 1.
* The process (``process_*``) and Python (``python_info``) collectors of
  prometheus_client.

The exporter's counters (connz byte and message sums) are gauges here too:
prometheus_client appends ``_total`` to counter names, which would break the
names.  Monitoring counts the request under ``/metrics`` in ``http_req_stats``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector

from node.monitor import endpoints
from node.monitor.connz import connz as connz_doc
from node.monitor.query import Query

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
CORE = "gnatsd"
JS = "jetstream"
OWN = "trijet"

SERVER_LABELS = ("server_id", "server_name", "cluster", "domain", "meta_leader", "is_meta_leader")
STREAM_LABELS = (
    *SERVER_LABELS,
    "account",
    "account_id",
    "stream_name",
    "stream_leader",
    "is_stream_leader",
)
CONSUMER_LABELS = (
    *STREAM_LABELS,
    "consumer_name",
    "consumer_leader",
    "is_consumer_leader",
    "consumer_desc",
    "consumer_created",
)
RAFT_GROUP_LABELS = ("server_id", "server_name", "group", "stream_name", "consumer_name")
RAFT_PEER_LABELS = (*RAFT_GROUP_LABELS, "peer_name")

CONNZ_FIELDS = ("pending_bytes", "subscriptions", "in_bytes", "out_bytes", "in_msgs", "out_msgs")
JS_SERVER_METRICS = (
    ("jetstream_disabled", "JetStream disabled or not"),
    ("total_streams", "Total number of streams in JetStream"),
    ("total_consumers", "Total number of consumers in JetStream"),
    ("total_messages", "Total number of stored messages in JetStream"),
    ("total_message_bytes", "Total number of bytes stored in JetStream"),
    ("max_memory", "JetStream Max Memory"),
    ("max_storage", "JetStream Max Storage"),
)
JS_STREAM_METRICS = (
    ("total_messages", "Total number of messages from a stream", "messages"),
    ("total_bytes", "Total stored bytes from a stream", "bytes"),
    ("first_seq", "First sequence from a stream", "first_seq"),
    ("last_seq", "Last sequence from a stream", "last_seq"),
    ("consumer_count", "Total number of consumers from a stream", "consumer_count"),
)
JS_CONSUMER_METRICS = (
    ("delivered_consumer_seq", "Latest sequence number of a stream consumer"),
    ("delivered_stream_seq", "Latest sequence number of a stream"),
    ("num_ack_pending", "Number of pending acks from a consumer"),
    ("num_redelivered", "Number of redelivered messages from a consumer"),
    ("num_waiting", "Number of inflight fetch requests from a pull consumer"),
    ("num_pending", "Number of pending messages from a consumer"),
    ("ack_floor_stream_seq", "Number of ack floor stream seq from a consumer"),
    ("ack_floor_consumer_seq", "Number of ack floor consumer seq from a consumer"),
)
VARZ_LABEL_KEYS = ("server_name", "version")
NS_PER_S = 1e9


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _tf(b: bool) -> str:
    return "true" if b else "false"


def _gauges(
    prefix: str, specs: tuple[tuple[str, str], ...], labels: tuple[str, ...]
) -> dict[str, GaugeMetricFamily]:
    return {
        name: GaugeMetricFamily(f"{prefix}_{name}", help_, labels=list(labels))
        for name, help_ in specs
    }


def varz_metrics(varz: Mapping[str, Any]) -> Iterator[Metric]:
    """``gnatsd_varz_*``: numeric top-level fields, and the exporter's label gauges."""
    sid = str(varz.get("server_id", ""))
    for key, value in varz.items():
        if _is_number(value):
            g = GaugeMetricFamily(f"{CORE}_varz_{key}", key, labels=["server_id"])
            g.add_metric([sid], float(value))
            yield g
        elif key in VARZ_LABEL_KEYS and isinstance(value, str):
            g = GaugeMetricFamily(f"{CORE}_varz_{key}", key, labels=["server_id", "value"])
            g.add_metric([sid, value], 1.0)
            yield g


def connz_metrics(server_id: str, connz: Mapping[str, Any]) -> Iterator[Metric]:
    """``gnatsd_connz_*``: page counters and sums over the listed connections."""
    for key in ("num_connections", "total", "offset", "limit"):
        g = GaugeMetricFamily(f"{CORE}_connz_{key}", key, labels=["server_id"])
        g.add_metric([server_id], float(connz.get(key) or 0))
        yield g
    conns = connz.get("connections") or []
    for key in CONNZ_FIELDS:
        g = GaugeMetricFamily(f"{CORE}_connz_{key}", key, labels=["server_id"])
        g.add_metric([server_id], float(sum(c.get(key) or 0 for c in conns)))
        yield g


def jsz_metrics(server_name: str, jsz: Mapping[str, Any]) -> Iterator[Metric]:
    """``jetstream_server_*``, ``jetstream_stream_*``, ``jetstream_consumer_*`` (exporter names)."""
    sid = str(jsz.get("server_id", ""))
    meta = jsz.get("meta_cluster")
    cluster = str(meta.get("name") or "") if meta else ""
    meta_leader = str(meta.get("leader") or "") if meta else ""
    is_meta_leader = _tf(meta_leader == server_name) if meta else "true"
    config = jsz.get("config") or {}
    server_lv = [sid, server_name, cluster, str(config.get("domain") or ""), meta_leader]
    server_lv.append(is_meta_leader)

    srv = _gauges(f"{JS}_server", JS_SERVER_METRICS, SERVER_LABELS)
    values = {
        "jetstream_disabled": 1.0 if jsz.get("disabled") else 0.0,
        "total_streams": jsz.get("streams") or 0,
        "total_consumers": jsz.get("consumers") or 0,
        "total_messages": jsz.get("messages") or 0,
        "total_message_bytes": jsz.get("bytes") or 0,
        "max_memory": config.get("max_memory") or 0,
        "max_storage": config.get("max_storage") or 0,
    }
    for name, fam in srv.items():
        fam.add_metric(server_lv, float(values[name]))
    yield from srv.values()

    streams = {
        n: GaugeMetricFamily(f"{JS}_stream_{n}", h, labels=list(STREAM_LABELS))
        for n, h, _ in JS_STREAM_METRICS
    }
    consumers = _gauges(f"{JS}_consumer", JS_CONSUMER_METRICS, CONSUMER_LABELS)
    for acc in jsz.get("account_details") or []:
        for st in acc.get("stream_detail") or []:
            leader = str((st.get("cluster") or {}).get("leader") or "")
            is_leader = _tf(leader == server_name) if st.get("cluster") else "true"
            stream_lv = [*server_lv, str(acc.get("name", "")), str(acc.get("id", ""))]
            stream_lv += [str(st.get("name", "")), leader, is_leader]
            state = st.get("state") or {}
            for n, _, field in JS_STREAM_METRICS:
                streams[n].add_metric(stream_lv, float(state.get(field) or 0))
            for co in st.get("consumer_detail") or []:
                cl = co.get("cluster")
                c_leader = str((cl or {}).get("leader") or "")
                c_lv = [*stream_lv, str(co.get("name", "")), c_leader]
                c_lv += [_tf(c_leader == server_name) if cl else "true"]
                c_lv += [str((co.get("config") or {}).get("description") or "")]
                c_lv += [str(co.get("created") or "")]
                delivered = co.get("delivered") or {}
                floor = co.get("ack_floor") or {}
                cvals = {
                    "delivered_consumer_seq": delivered.get("consumer_seq"),
                    "delivered_stream_seq": delivered.get("stream_seq"),
                    "num_ack_pending": co.get("num_ack_pending"),
                    "num_redelivered": co.get("num_redelivered"),
                    "num_waiting": co.get("num_waiting"),
                    "num_pending": co.get("num_pending"),
                    "ack_floor_stream_seq": floor.get("stream_seq"),
                    "ack_floor_consumer_seq": floor.get("consumer_seq"),
                }
                for n, fam in consumers.items():
                    fam.add_metric(c_lv, float(cvals[n] or 0))
    yield from streams.values()
    yield from consumers.values()


class _RaftFamilies:
    def __init__(self) -> None:
        g, p = list(RAFT_GROUP_LABELS), list(RAFT_PEER_LABELS)
        self.leader = GaugeMetricFamily(
            f"{OWN}_raft_group_leader", "1 when this server leads the Raft group", labels=g
        )
        self.size = GaugeMetricFamily(
            f"{OWN}_raft_group_size", "Peers in the Raft group, this server included", labels=g
        )
        self.current = GaugeMetricFamily(
            f"{OWN}_raft_replica_current", "1 when the peer is current with the leader", labels=p
        )
        self.active = GaugeMetricFamily(
            f"{OWN}_raft_replica_active_seconds", "Seconds since the peer was last heard", labels=p
        )
        self.lag = GaugeMetricFamily(
            f"{OWN}_raft_replica_lag", "Entries the peer is behind the leader", labels=p
        )

    def add_cluster(self, base: list[str], cl: Mapping[str, Any], server_name: str) -> None:
        replicas = cl.get("replicas") or []
        self.leader.add_metric(base, 1.0 if cl.get("leader") == server_name else 0.0)
        self.size.add_metric(base, float(len(replicas) + 1))
        for r in replicas:
            lv = [*base, str(r.get("name", ""))]
            self.current.add_metric(lv, 1.0 if r.get("current") else 0.0)
            self.active.add_metric(lv, float(r.get("active") or 0) / NS_PER_S)
            if r.get("lag") is not None:
                self.lag.add_metric(lv, float(r["lag"]))

    def families(self) -> list[Metric]:
        return [self.leader, self.size, self.current, self.active, self.lag]


def raft_metrics(
    server_id: str, server_name: str, jsz: Mapping[str, Any], raftz: Mapping[str, Any]
) -> Iterator[Metric]:
    """``trijet_raft_*`` and ``trijet_jetstream_meta_leader`` from ``/jsz`` and ``/raftz``."""
    fams = _RaftFamilies()
    meta = jsz.get("meta_cluster")
    if meta:
        fams.add_cluster([server_id, server_name, "_meta_", "", ""], meta, server_name)
        ml = GaugeMetricFamily(
            f"{OWN}_jetstream_meta_leader",
            "The meta leader this server knows (value 1)",
            labels=["server_id", "leader"],
        )
        ml.add_metric([server_id, str(meta.get("leader") or "")], 1.0)
        yield ml
    for acc in jsz.get("account_details") or []:
        for st in acc.get("stream_detail") or []:
            cl = st.get("cluster") or {}
            if cl.get("raft_group"):
                base = [server_id, server_name, str(cl["raft_group"]), str(st["name"]), ""]
                fams.add_cluster(base, cl, server_name)
            for co in st.get("consumer_detail") or []:
                ccl = co.get("cluster") or {}
                if ccl.get("raft_group"):
                    base = [server_id, server_name, str(ccl["raft_group"]), str(st["name"])]
                    fams.add_cluster([*base, str(co.get("name", ""))], ccl, server_name)
    yield from fams.families()
    meta_doc = (raftz.get("$SYS") or {}).get("_meta_") or {}
    base = [server_id, server_name, "_meta_", "", ""]
    for key, help_ in (
        ("term", "Current Raft term"),
        ("committed", "Highest committed log index"),
        ("applied", "Highest applied log index"),
    ):
        if _is_number(meta_doc.get(key)):
            g = GaugeMetricFamily(f"{OWN}_raft_{key}", help_, labels=list(RAFT_GROUP_LABELS))
            g.add_metric(base, float(meta_doc[key]))
            yield g


class ServerCollector(Collector):
    """Collects one server's metrics at scrape time (see the module docstring).

    Args:
        server: the monitored server (what the JSON endpoints read).
        sampler: the monitor's process sampler, shared with ``/varz``.
    """

    def __init__(self, server: Any, sampler: endpoints.ProcSampler) -> None:
        self.server = server
        self.sampler = sampler

    def collect(self) -> Iterator[Metric]:
        server = self.server
        varz = endpoints.varz(server, Query(), proc=self.sampler.sample())
        sid = str(varz.get("server_id", ""))
        name = str(varz.get("server_name", ""))
        yield from varz_metrics(varz)
        yield from connz_metrics(sid, connz_doc(server, Query()))
        if server.cfg.jetstream.enabled:
            jsz = endpoints.jsz(server, Query({"consumers": "true", "config": "true"}))
            yield from jsz_metrics(name, jsz)
            yield from raft_metrics(sid, name, jsz, endpoints.raftz(server, Query()))


def make_registry(server: Any, sampler: endpoints.ProcSampler) -> CollectorRegistry:
    """A registry of its own (not the process-global one) for one server's monitor."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ServerCollector(server, sampler))
    ProcessCollector(registry=reg)
    PlatformCollector(registry=reg)
    return reg


def render(registry: CollectorRegistry) -> bytes:
    """The text exposition of ``registry`` (Prometheus text format 0.0.4)."""
    return generate_latest(registry)
