"""The monitoring documents other than ``/connz``: pure functions of server state.

Theory of operation: each endpoint is ``f(server, query, *, now=...) -> dict``
(``varz`` also takes a :class:`ProcStats` sample) built in nats-server's key
order, with Go spellings from :mod:`node.monitor.gofmt`.  They read the
server's fields and never mutate it; counting requests and sampling the
process are the HTTP shell's business.  What does not exist in trijet yet
(routes, leaf nodes, gateways, MQTT, websockets) is reported the way
nats-server reports it when unconfigured.

JetStream: the configuration comes from ``cfg.jetstream`` (defaults resolved
as nats-server does).  ``/varz`` takes usage from an optional
``server.jetstream_stats()`` returning a dict that may hold ``stats``
(JetStreamStats: memory, storage, reserved_memory, reserved_storage,
accounts, ha_assets, api{level,total,errors}), ``meta`` (MetaClusterInfo) and
``limits``; whatever it returns overrides the zeros here.  ``/jsz`` is built
by :mod:`node.monitor.jsz` from ``server.jetstream_view()``.

Keys deliberately left out of ``/varz`` (they describe the Go runtime or
features trijet lacks): ``feature_flags`` (nats-server-internal JetStream
switches), ``gomemlimit``, ``trusted_operators_*``, ``ocsp_peer_cache``,
``proxies``, ``tls_cert_not_after``, ``pinned_account_fails``.
``gomaxprocs`` is reported as the number of usable cores.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Any

from node.monitor.connz import GLOBAL_ACCOUNT, SYSTEM_ACCOUNT, account_name, sub_detail
from node.monitor.gofmt import NS_PER_S, go_time, rtt_string, uptime
from node.monitor.jsz import jsz as jsz_doc
from node.monitor.leafz import leaf_varz, leafz_doc
from node.monitor.query import MonitorError, Query
from node.subjects import valid_literal_subject
from node.version import JS_API_LEVEL, NATS_VERSION

SUB_LIST_SIZE_DEFAULT = 1024
TLS_TIMEOUT_S_DEFAULT = 2.0
JS_MEMORY_DEFAULT_FRACTION = 0.75  # nats-server: 75% of physical memory
JS_STORAGE_DEFAULT_FRACTION = 0.75  # nats-server: 75% of free disk at the store dir
JS_SYNC_INTERVAL_DEFAULT_S = 120.0  # nats-server's default, reported beside sync_always


# -- process sampling -------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcStats:
    """One sample of the process for ``/varz``: resident bytes, CPU percent, usable cores."""

    rss_bytes: int = 0
    cpu_percent: float = 0.0
    cores: int = 1


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(maxrss if sys.platform == "darwin" else maxrss * 1024)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class ProcSampler:
    """CPU percent between successive samples (nats-server samples once a second).

    Args:
        cpu_clock: process CPU seconds (``time.process_time``).
        wall_clock: monotonic seconds.
    """

    def __init__(self, cpu_clock: Any = time.process_time, wall_clock: Any = time.monotonic):
        self._cpu = cpu_clock
        self._wall = wall_clock
        self._last = (self._cpu(), self._wall())
        self._pct = 0.0

    def sample(self) -> ProcStats:
        cpu, wall = self._cpu(), self._wall()
        dcpu, dwall = cpu - self._last[0], wall - self._last[1]
        if dwall >= 0.05:  # too short a window says nothing
            self._pct = round(100.0 * dcpu / dwall, 1)
            self._last = (cpu, wall)
        return ProcStats(rss_bytes=_rss_bytes(), cpu_percent=self._pct, cores=_cores())


# -- shared helpers ---------------------------------------------------------------------------


def _ns(seconds: float) -> int:
    return round(seconds * NS_PER_S)


def _now(server: Any, now: float | None) -> float:
    return server.wall_time() if now is None else now


def _js_hook(server: Any) -> dict[str, Any]:
    fn = getattr(server, "jetstream_stats", None)
    return dict(fn()) if callable(fn) else {}


def js_store_limits(js: Any) -> tuple[int, int]:
    """The server's JetStream ``(max_memory, max_storage)`` in bytes: as
    configured, else nats-server's dynamic defaults (75% of physical memory,
    75% of the free disk at the store dir, read now)."""
    store_dir = js.jetstream_dir
    max_mem = js.max_memory_store
    if max_mem is None or max_mem < 0:
        try:
            max_mem = int(
                os.sysconf("SC_PAGE_SIZE")
                * os.sysconf("SC_PHYS_PAGES")
                * JS_MEMORY_DEFAULT_FRACTION
            )
        except (ValueError, OSError, AttributeError):
            max_mem = 0
    max_store = js.max_file_store
    if max_store is None or max_store < 0:
        probe = store_dir
        while probe and not os.path.exists(probe):
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        try:
            max_store = int(shutil.disk_usage(probe or ".").free * JS_STORAGE_DEFAULT_FRACTION)
        except OSError:
            max_store = 0
    return max_mem, max_store


def _js_config(server: Any) -> dict[str, Any]:
    """JetStreamConfig as nats-server reports it (defaults resolved like nats-server)."""
    js = server.cfg.jetstream
    store_dir = js.jetstream_dir
    max_mem, max_store = js_store_limits(js)
    cfg: dict[str, Any] = {"max_memory": max_mem, "max_storage": max_store, "store_dir": store_dir}
    if isinstance(js.sync_interval, int | float) and js.sync_interval > 0:
        cfg["sync_interval"] = _ns(float(js.sync_interval))
    else:
        # "always", and trijet's default (nats-server's default is a 2 minute
        # interval; trijet syncs before every PubAck unless told otherwise):
        # reported as nats-server reports ``sync_interval: always``
        cfg["sync_interval"] = _ns(JS_SYNC_INTERVAL_DEFAULT_S)
        cfg["sync_always"] = True
    if js.domain:
        cfg["domain"] = js.domain
    if (js.max_memory_store or 0) > 0 and (js.max_file_store or 0) > 0:
        cfg["compress_ok"] = True  # nats-server's static (not dynamic) JetStream config
    if js.unique_tag:
        cfg["unique_tag"] = js.unique_tag
    if js.strict:
        cfg["strict"] = True
    return cfg


def _js_stats(hook: dict[str, Any]) -> dict[str, Any]:
    stats: dict[str, Any] = {
        "memory": 0,
        "storage": 0,
        "reserved_memory": 0,
        "reserved_storage": 0,
        "accounts": 0,
        "ha_assets": 0,
        "api": {"level": JS_API_LEVEL, "total": 0, "errors": 0},
    }
    stats.update(hook.get("stats") or {})
    return stats


def _js_limits(server: Any, hook: dict[str, Any]) -> dict[str, Any]:
    limits = dict(server.cfg.jetstream.limits or {})
    limits.update(hook.get("limits") or {})
    return limits


# -- /varz ------------------------------------------------------------------------------------


def _cluster_varz(server: Any) -> dict[str, Any]:
    cl = server.cfg.cluster
    if cl is None:
        return {}
    out: dict[str, Any] = {}
    if cl.name:
        out["name"] = cl.name
    if cl.host:
        out["addr"] = cl.host
    port = getattr(server, "cluster_port", 0) or cl.port
    if port and port > 0:
        out["cluster_port"] = port
    if cl.auth_timeout_s:
        out["auth_timeout"] = cl.auth_timeout_s
    urls = [_route_hostport(u) for u in cl.routes]
    if urls:
        out["urls"] = urls
    out["tls_timeout"] = TLS_TIMEOUT_S_DEFAULT
    if cl.pool_size:
        out["pool_size"] = cl.pool_size
    return out


def _route_hostport(url: str) -> str:
    """``nats://user:pw@host:port`` → ``host:port`` (Go's ``url.Host``)."""
    rest = url.split("://", 1)[-1]
    rest = rest.rsplit("@", 1)[-1]
    return rest.split("/", 1)[0]


def _jetstream_varz(server: Any) -> dict[str, Any]:
    if not server.cfg.jetstream.enabled:
        return {}
    hook = _js_hook(server)
    out: dict[str, Any] = {"config": _js_config(server), "stats": _js_stats(hook)}
    if hook.get("meta"):
        out["meta"] = hook["meta"]
    out["limits"] = _js_limits(server, hook)
    return out


def varz(
    server: Any,
    query: Query | None = None,
    *,
    now: float | None = None,
    proc: ProcStats | None = None,
) -> dict[str, Any]:
    """The ``/varz`` document (general server information and counters)."""
    del query  # /varz takes no parameters
    now = _now(server, now)
    proc = proc or ProcStats(cores=_cores())
    cfg = server.cfg
    info = server.base_info()
    accs = accounts_of(server)
    routers = [a.router for a in accs] or [server.router]
    out_msgs = sum(r.out_msgs for r in routers)
    out_bytes = sum(r.out_bytes for r in routers)
    stats = server.stats
    tls_timeout = cfg.tls.timeout_s if cfg.tls is not None else TLS_TIMEOUT_S_DEFAULT
    v: dict[str, Any] = {
        "server_id": server.server_id,
        "server_name": server.server_name,
        "version": NATS_VERSION,
        "proto": info.get("proto", 1),
        "git_commit": info.get("git_commit", ""),
        "go": info.get("go", ""),
        "host": server.client_host,
        "port": server.client_port,
    }
    for key in ("auth_required", "tls_required", "tls_verify"):
        if info.get(key):
            v[key] = True
    if info.get("connect_urls"):
        v["connect_urls"] = list(info["connect_urls"])
    v["max_connections"] = cfg.max_connections
    if cfg.max_subscriptions:
        v["max_subscriptions"] = cfg.max_subscriptions
    v.update(
        {
            "ping_interval": _ns(cfg.ping_interval_s),
            "ping_max": cfg.ping_max,
            "http_host": server.http_host or cfg.monitor_host,
            "http_port": server.http_port,
            "http_base_path": cfg.http_base_path,
            "https_port": cfg.https_port,
            "auth_timeout": cfg.auth.timeout_s,
            "max_control_line": cfg.max_control_line,
            "max_payload": cfg.max_payload,
            "max_pending": cfg.max_pending,
            "cluster": _cluster_varz(server),
            "gateway": {},
            "leaf": leaf_varz(server),
            "mqtt": {},
            "websocket": {},
            "jetstream": _jetstream_varz(server),
            "tls_timeout": tls_timeout,
            "write_deadline": _ns(cfg.write_deadline_s),
            "start": go_time(server.start_wall),
            "now": go_time(now),
            "uptime": uptime(now - server.start_wall),
            "mem": proc.rss_bytes,
            "cores": proc.cores,
            "gomaxprocs": proc.cores,
            "cpu": proc.cpu_percent,
            "connections": len(server.clients),
            "total_connections": stats.total_connections,
            "routes": len(_routes(server)),
            "remotes": len(server.cfg.cluster.routes) if server.cfg.cluster else 0,
            "leafnodes": len(server.leafnodes.links),
            "in_msgs": stats.in_msgs,
            "in_bytes": stats.in_bytes,
            "in_client_msgs": stats.in_msgs,
            "in_client_bytes": stats.in_bytes,
            "out_msgs": out_msgs,
            "out_bytes": out_bytes,
            "out_client_msgs": out_msgs,
            "out_client_bytes": out_bytes,
            "slow_consumers": stats.slow_consumers,
            "stale_connections": stats.stale_connections,
            "stalled_clients": stats.stalled_clients,
            "subscriptions": sum(a.sublist.count for a in accs) if accs else server.sublist.count,
            "http_req_stats": dict(server.http_req_stats),
            "config_load_time": go_time(server.config_load_time),
            "config_digest": cfg.config_digest or "",
        }
    )
    if cfg.server_tags:
        v["tags"] = list(cfg.server_tags)
    v["system_account"] = system_account_name(server)
    v["slow_consumer_stats"] = {
        "clients": stats.slow_consumers,
        "routes": 0,
        "gateways": 0,
        "leafs": 0,
    }
    v["stale_connection_stats"] = {
        "clients": stats.stale_connections,
        "routes": 0,
        "gateways": 0,
        "leafs": 0,
    }
    v["disk_io_wait_stats"] = {"waiters": 0, "waits": 0, "wait_time": 0, "max_wait_time": 0}
    # not a nats-server field: failures contained by trijet's last-resort guards
    v["trijet_internal_errors"] = stats.internal_errors
    return v


# -- /subsz -----------------------------------------------------------------------------------


def sublist_stats(*sublists: Any) -> dict[str, Any]:
    """SublistStats: counters plus fanout computed from the match cache, as nats-server
    does; several sublists (one per account) are added up."""
    keys = ("num_subscriptions", "num_cache", "num_inserts", "num_removes", "num_matches")
    sums = dict.fromkeys(keys, 0)
    hits = 0.0
    tot = mx = n_results = 0
    for sublist in sublists:
        st = dict(sublist.stats())
        for k in keys:
            sums[k] += st[k]
        hits += float(st["cache_hit_rate"]) * st["num_matches"]
        results = list(sublist.cached_results()) if hasattr(sublist, "cached_results") else []
        n_results += len(results)
        for r in results:
            n = len(r.psubs) + len(r.qsubs)
            tot += n
            mx = max(mx, n)
    rate = hits / sums["num_matches"] if sums["num_matches"] else 0.0
    if len(sublists) == 1:
        rate = float(dict(sublists[0].stats())["cache_hit_rate"])
    return {
        **sums,
        "cache_hit_rate": rate,
        "max_fanout": mx,
        "avg_fanout": tot / n_results if tot else 0.0,
    }


def accounts_of(server: Any) -> list[Any]:
    """The server's accounts (``node.accounts.Account``), ``$G`` first."""
    accs = getattr(server, "accounts", None)
    return list(accs) if accs is not None else []


def system_account_name(server: Any) -> str:
    accs = getattr(server, "accounts", None)
    return accs.system.name if accs is not None else SYSTEM_ACCOUNT


def _account(server: Any, name: str | None) -> Any:
    accs = getattr(server, "accounts", None)
    return accs.get(name) if accs is not None and name else None


def subsz(server: Any, query: Query | None = None, *, now: float | None = None) -> dict[str, Any]:
    """The ``/subsz`` document (``subs``, ``offset``, ``limit``, ``test``, ``acc``).

    Raises:
        MonitorError: 400 for a bad parameter or a non-literal ``test`` subject.
    """
    q = query or Query()
    subs = q.bool("subs")
    offset = max(q.int("offset"), 0)
    limit = q.int("limit")
    if limit <= 0:
        limit = SUB_LIST_SIZE_DEFAULT
    test = q.get("test")
    if test and not valid_literal_subject(test.encode()):
        raise MonitorError(400, f"invalid test subject, must be valid publish subject: {test}")
    acc = q.get("acc")
    now = _now(server, now)
    if acc:
        one = _account(server, acc)
        sublists = [one.sublist] if one is not None else []
    else:
        sublists = [a.sublist for a in accounts_of(server)] or [server.sublist]
    counted = bool(sublists)
    stats = (
        sublist_stats(*sublists)
        if counted
        else {
            "num_subscriptions": 0,
            "num_cache": 0,
            "num_inserts": 0,
            "num_removes": 0,
            "num_matches": 0,
            "cache_hit_rate": 0.0,
            "max_fanout": 0,
            "avg_fanout": 0.0,
        }
    )
    doc: dict[str, Any] = {"server_id": server.server_id, "now": go_time(now), **stats}
    doc.update({"total": 0, "offset": offset, "limit": limit})
    if subs:
        all_subs = []
        for sl in sublists:
            found = list(sl.all())
            if test:
                interested = sl.match(test.encode())
                keep = {id(s) for s in interested.psubs}
                keep.update(id(s) for g in interested.qsubs for s in g)
                found = [s for s in found if id(s) in keep]
            all_subs += found
        details = []
        for s in all_subs:
            client = getattr(s, "client", None)
            if client is None:
                continue
            details.append(sub_detail(s, client.cid, with_account=account_name(client)))
        lo = min(offset, len(details))
        hi = lo + min(limit, len(details) - lo)
        doc["total"] = len(details)
        if details[lo:hi]:
            doc["subscriptions_list"] = details[lo:hi]
    return doc


# -- small documents --------------------------------------------------------------------------


def _routes(server: Any) -> list[Any]:
    """Registered routes (``server.routes.by_id``), by rid; empty when not clustered."""
    by_id = getattr(getattr(server, "routes", None), "by_id", None) or {}
    return sorted(by_id.values(), key=lambda r: r.rid)


def _route_info(route: Any, now: float, subs: bool, subs_detail: bool) -> dict[str, Any]:
    start = float(route.start_wall)
    last = float(getattr(route, "last_activity_wall", start) or start)
    remote = _route_subs(route)
    info: dict[str, Any] = {
        "rid": route.rid,
        "remote_id": route.remote_id,
        "remote_name": route.remote_name,
        "did_solicit": bool(route.solicited),
        "is_configured": bool(getattr(route, "configured", False)),
        "ip": route.ip,
        "port": route.port,
        "start": go_time(start),
        "last_activity": go_time(last),
        "rtt": rtt_string(float(getattr(route, "rtt_s", 0.0))),
        "uptime": uptime(now - start),
        "idle": uptime(now - last),
        "pending_size": int(getattr(route, "pending_bytes", 0)),
        "in_msgs": int(route.in_msgs),
        "out_msgs": int(route.out_msgs),
        "in_bytes": int(route.in_bytes),
        "out_bytes": int(route.out_bytes),
        "subscriptions": len(remote),
    }
    if remote and subs_detail:
        info["subscriptions_list_detail"] = [
            _route_sub_detail(sid, rs, route.rid) for sid, rs in remote
        ]
    elif remote and subs:
        info["subscriptions_list"] = [rs.subject.decode(errors="replace") for _, rs in remote]
    # never compressed (no s2 codec): "off" as negotiated with a peer that announced a
    # mode, nats-server's "not supported" for one that announced none
    peer_info = getattr(route, "remote_info", None) or {}
    info["compression"] = "off" if peer_info.get("compression") else "not supported"
    return info


def _route_subs(route: Any) -> list[tuple[bytes, Any]]:
    """A route's interest as nats-server lists it: the peer's own (``RS+``, sid ``R
    <account> <subject> [<queue>]``), then its leaf clusters' (``LS+ <origin>``, sid ``L
    <origin> <account> <subject> [<queue>]``); a peer without ``lnocu``'s, both kinds
    in one, ``<account> <subject> [<queue>]``."""
    bare = bool(getattr(route, "keyed_without_origin", False))
    out = []
    for kind, subs in ((b"R ", "remote_subs"), (b"L ", "origin_subs")):
        for key, rs in getattr(route, subs, {}).items():
            sid = b" ".join(k for k in key if k)
            out.append((sid if bare else kind + sid, rs))
    return out


def _route_sub_detail(sid: bytes, rs: Any, rid: int) -> dict[str, Any]:
    """One ``SubDetail`` of a route (trijet counts no messages per route interest)."""
    d: dict[str, Any] = {"subject": rs.subject.decode(errors="replace")}
    if rs.queue:
        d["qgroup"] = rs.queue.decode(errors="replace")
    d.update({"sid": sid.decode(errors="replace"), "msgs": 0, "cid": rid})
    return d


def routez(server: Any, query: Query | None = None, *, now: float | None = None) -> dict[str, Any]:
    """The ``/routez`` document (``subs=true|detail``)."""
    q = query or Query()
    subs, subs_detail = q.subs()
    now = _now(server, now)
    routes = [_route_info(r, now, subs, subs_detail) for r in _routes(server)]
    return {
        "server_id": server.server_id,
        "server_name": server.server_name,
        "now": go_time(now),
        "num_routes": len(routes),
        "routes": routes,
    }


def leafz(server: Any, query: Query | None = None, *, now: float | None = None) -> dict[str, Any]:
    """The ``/leafz`` document (``subs=1``, ``acc=``): see ``node.monitor.leafz``."""
    q = query or Query()
    subs = q.bool("subs")
    return leafz_doc(server, _now(server, now), subs, q.get("acc") or None)


def gatewayz(
    server: Any, query: Query | None = None, *, now: float | None = None
) -> dict[str, Any]:
    """The ``/gatewayz`` document (no gateways)."""
    q = query or Query()
    q.bool("accs")
    q.bool("subs")
    return {
        "server_id": server.server_id,
        "now": go_time(_now(server, now)),
        "outbound_gateways": {},
        "inbound_gateways": {},
    }


def accountz(
    server: Any, query: Query | None = None, *, now: float | None = None
) -> dict[str, Any]:
    """The ``/accountz`` document; ``acc=`` adds a short ``account_detail``."""
    q = query or Query()
    now = _now(server, now)
    system = system_account_name(server)
    doc: dict[str, Any] = {
        "server_id": server.server_id,
        "now": go_time(now),
        "system_account": system,
    }
    acc = q.get("acc")
    accs = accounts_of(server)
    if not acc:
        doc["accounts"] = [a.name for a in accs] or [GLOBAL_ACCOUNT, SYSTEM_ACCOUNT]
        return doc
    one = _account(server, acc)
    if one is None:
        raise MonitorError(400, f"Account {acc} does not exist")
    detail: dict[str, Any] = {
        "account_name": acc,
        "update_time": go_time(server.start_wall),
    }
    if acc == system:
        detail["is_system"] = True
    clients = [c for c in server.clients.values() if account_name(c) == acc]
    detail.update(
        {
            "expired": False,
            "complete": True,
            "jetstream_enabled": bool(one.jetstream and server.cfg.jetstream.enabled),
            "leafnode_connections": 0,
            "client_connections": len(clients),
            "subscriptions": one.sublist.count,
        }
    )
    doc["account_detail"] = detail
    return doc


def healthz(server: Any, query: Query | None = None) -> tuple[int, dict[str, Any]]:
    """``/healthz``: (HTTP status, body).

    Without JetStream configured every check passes (nats-server stops there,
    whatever ``js-enabled-only`` says).  With it, the optional
    ``server.jetstream_health(opts)`` hook decides; until JetStream exists
    the answer is ok.
    """
    q = query or Query()
    opts = {
        "js-enabled": q.bool("js-enabled"),
        "js-enabled-only": q.bool("js-enabled-only"),
        "js-server-only": q.bool("js-server-only"),
        "js-meta-only": q.bool("js-meta-only"),
        "details": q.bool("details"),
        "account": q.get("account"),
        "stream": q.get("stream"),
        "consumer": q.get("consumer"),
    }
    details = opts["details"]

    def bad(msg: str) -> tuple[int, dict[str, Any]]:
        if details:
            return 400, {"status": "error", "errors": [{"type": "BAD_REQUEST", "error": msg}]}
        return 400, {"status": "error", "error": msg}

    if not opts["account"] and opts["stream"]:
        return bad('"account" must not be empty when checking stream health')
    if not opts["stream"] and opts["consumer"]:
        return bad('"stream" must not be empty when checking consumer health')
    ok: dict[str, Any] = {"status": "ok"}
    if opts["js-server-only"] or not server.cfg.jetstream.enabled:
        return 200, ok
    hook = getattr(server, "jetstream_health", None)
    if callable(hook):
        status, body = hook(opts)
        return int(status), dict(body)
    return 200, ok


def raftz(server: Any, query: Query | None = None) -> dict[str, Any]:
    """``/raftz``: the Raft groups this server runs, by account and group name.

    Without ``acc`` only the system account's groups (the meta group
    ``_meta_``, shown under the system account's name); ``group=`` filters by name; an
    unknown account is ``{}``.  A JetStream account (``acc=$G``, ``acc=APP`` …) lists the
    groups of its replicated streams (with trijet's compaction and catch-up counters).
    """
    q = query or Query()
    system = system_account_name(server)
    acc = q.get("acc") or system
    group = q.get("group")
    js = getattr(server, "jetstream", None)
    meta = getattr(js, "meta", None)
    if meta is not None and acc != system:
        accounts = getattr(server, "accounts", None)
        home = getattr(getattr(accounts, "home", None), "name", "$G")
        services = getattr(server, "js_services", None) or [js]
        svc = next(
            (s for s in services if getattr(getattr(s, "account", None), "name", home) == acc),
            None,
        )
        api = getattr(svc, "api", None)
        groups: dict[str, Any] = {}
        if api is not None:
            for stream in list(api.streams.values()):
                rg = getattr(stream, "replicated", None)
                if rg is None or (group and group != rg.group_id):
                    continue
                groups[rg.group_id] = meta.stream_raftz(stream)
        return {acc: groups} if groups else {}
    if meta is None or acc != system or (group and group != "_meta_"):
        return {}
    doc = meta.raftz()
    return {system: {"_meta_": doc}} if doc else {}


def jsz(server: Any, query: Query | None = None, *, now: float | None = None) -> dict[str, Any]:
    """The ``/jsz`` document (see :mod:`node.monitor.jsz` for the options)."""
    js_config = _js_config(server) if server.cfg.jetstream.enabled else None
    limits = dict(server.cfg.jetstream.limits or {})
    return jsz_doc(server, query, now=now, js_config=js_config, js_limits=limits)
