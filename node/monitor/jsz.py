"""``/jsz``: JetStream state as nats-server's monitoring endpoint reports it.

Theory of operation: :func:`jsz` is a pure function of the server and the
query.  The JetStream service hands it one :class:`JetStreamView` (through
the optional ``server.jetstream_view()`` hook): server-wide usage and API
counters plus, per account, usage and a :class:`StreamView` per stream.
Without a view (JetStream configured but not running yet) the figures are
zero.  The document follows nats-server's ``JSInfo`` struct:

``memory, storage, reserved_memory, reserved_storage, accounts, ha_assets,
api{level,total,errors[,inflight]}, server_id, now, [disabled], config,
[limits], streams, [streams_leader], consumers, [consumers_leader],
messages, bytes, [meta_cluster], [account_details], total``.

Query options (Go ``strconv`` parsing, 400 with nats-server's text on a bad
value): ``accounts``, ``streams``, ``consumers``, ``direct-consumers``,
``config``, ``leader-only``, ``offset``, ``limit``, ``raft``,
``stream-leader-only`` and ``acc``.  nats-server's rules, kept here:

* ``consumers`` implies ``streams``; ``streams`` without ``acc`` implies
  ``accounts``.
* ``acc=<name>`` of a JetStream account selects just that account (ignoring
  ``offset``/``limit``); an unknown name selects none and, unlike
  ``accounts``, is not an error.
* ``accounts`` pages the accounts sorted by name with ``offset`` (clamped)
  and ``limit`` (0 → 1024; negative → no paging).  Totals always cover
  every account.
* ``leader-only`` answers 400 ``…: not leader`` on a server that is not the
  meta leader (a single server always leads).
* Stream details: ``name, created, [cluster], [config], state,
  [consumer_detail], [direct_consumer_detail], [mirror], [sources],
  [stream_raft_group], [consumer_raft_groups]``; ``config`` only with
  ``config=true``; consumer entries drop their ``config`` unless
  ``config=true``.  ``raft=true`` counts ``streams_leader`` /
  ``consumers_leader`` (assets without a Raft group count as led) and names
  the groups of replicated streams.
* An account's ``reserved_*`` are its JetStream limits as Go's ``uint64``:
  unlimited (-1) shows as 18446744073709551615; its ``api.level`` is 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from node.jsapi.render import rfc3339_ns, state_dict
from node.monitor.gofmt import go_time
from node.monitor.query import MonitorError, Query
from store.api import StreamState

JSZ_LIMIT_DEFAULT = 1024
UINT64_MOD = 1 << 64


@dataclass(frozen=True, slots=True)
class StreamView:
    """One stream as ``/jsz`` sees it.

    Attributes:
        name: the stream.
        created_ns: creation time, Unix nanoseconds.
        state: the store's state (no deleted/subject details).
        config: gives the StreamConfig JSON object (called only for ``config=true``).
        consumer_count: consumers on the stream.
        cluster: the ClusterInfo object (``{"leader": …}`` on one server).
        consumers: ConsumerInfo objects of the public consumers (with ``config``).
        direct_consumers: ConsumerInfo objects of direct (internal) consumers.
        mirror: StreamSourceInfo of a mirror, or None.
        sources: StreamSourceInfo objects of the sources.
        raft_group: the stream's Raft group name, "" when it has none.
        consumer_raft_groups: consumer name -> its Raft group name.
        leader: whether this server leads the stream (True without a group).
        consumers_led: how many of its consumers this server leads.
    """

    name: str
    created_ns: int
    state: StreamState
    config: Callable[[], Mapping[str, Any]]
    consumer_count: int = 0
    cluster: Mapping[str, Any] | None = None
    consumers: Sequence[Mapping[str, Any]] = ()
    direct_consumers: Sequence[Mapping[str, Any]] = ()
    mirror: Mapping[str, Any] | None = None
    sources: Sequence[Mapping[str, Any]] = ()
    raft_group: str = ""
    consumer_raft_groups: Mapping[str, str] = field(default_factory=dict)
    leader: bool = True
    consumers_led: int = 0


@dataclass(frozen=True, slots=True)
class AccountView:
    """One JetStream-enabled account.

    Attributes:
        name: the account name (also reported as ``id``).
        memory: bytes in memory streams.
        storage: bytes in file streams.
        max_memory: the account's memory limit (-1 unlimited).
        max_storage: the account's storage limit (-1 unlimited).
        api_total: API requests counted for the account.
        api_errors: of which errors.
        streams: its streams.
    """

    name: str
    memory: int = 0
    storage: int = 0
    max_memory: int = -1
    max_storage: int = -1
    api_total: int = 0
    api_errors: int = 0
    streams: Sequence[StreamView] = ()


@dataclass(frozen=True, slots=True)
class JetStreamView:
    """Server-wide JetStream figures (nats-server's JetStreamStats and more).

    Attributes:
        memory: bytes used by memory streams.
        storage: bytes used by file streams.
        reserved_memory: sum of ``max_bytes`` of memory streams.
        reserved_storage: sum of ``max_bytes`` of file streams.
        ha_assets: Raft groups this server runs.
        api_level: the JetStream API level reported.
        api_total: API requests answered through the API layer.
        api_errors: of which errors.
        api_inflight: requests queued or being handled.
        accounts: the JetStream-enabled accounts.
        meta: MetaClusterInfo when clustered, else None.
        leader: whether this server is the meta leader (always on one server).
    """

    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    ha_assets: int = 0
    api_level: int = 0
    api_total: int = 0
    api_errors: int = 0
    api_inflight: int = 0
    accounts: Sequence[AccountView] = ()
    meta: Mapping[str, Any] | None = None
    leader: bool = True


@dataclass(frozen=True, slots=True)
class JszOptions:
    """Decoded ``/jsz`` query (after nats-server's implied options)."""

    account: str = ""
    accounts: bool = False
    streams: bool = False
    consumers: bool = False
    direct_consumers: bool = False
    config: bool = False
    leader_only: bool = False
    offset: int = 0
    limit: int = JSZ_LIMIT_DEFAULT
    raft: bool = False
    stream_leader_only: bool = False

    @classmethod
    def parse(cls, q: Query) -> JszOptions:
        """Decode in nats-server's order (the first bad parameter is the one reported).

        Raises:
            MonitorError: 400 for a value Go's ``strconv`` rejects.
        """
        accounts = q.bool("accounts")
        streams = q.bool("streams")
        consumers = q.bool("consumers")
        direct = q.bool("direct-consumers")
        config = q.bool("config")
        offset = q.int("offset")
        limit = q.int("limit")
        leader_only = q.bool("leader-only")
        raft = q.bool("raft")
        stream_leader_only = q.bool("stream-leader-only")
        account = q.get("acc")
        streams = streams or consumers
        return cls(
            account=account,
            accounts=accounts or (streams and not account),
            streams=streams,
            consumers=consumers,
            direct_consumers=direct,
            config=config,
            leader_only=leader_only,
            offset=max(offset, 0),
            limit=limit or JSZ_LIMIT_DEFAULT,
            raft=raft,
            stream_leader_only=stream_leader_only,
        )


def api_stats(level: int, total: int, errors: int, inflight: int = 0) -> dict[str, Any]:
    """JetStreamAPIStats (``inflight`` omitted when 0)."""
    api: dict[str, Any] = {"level": level, "total": total, "errors": errors}
    if inflight:
        api["inflight"] = inflight
    return api


def jetstream_stats(view: JetStreamView) -> dict[str, Any]:
    """JetStreamStats of the server (``/jsz`` top level, ``/varz`` ``jetstream.stats``)."""
    return {
        "memory": view.memory,
        "storage": view.storage,
        "reserved_memory": view.reserved_memory,
        "reserved_storage": view.reserved_storage,
        "accounts": len(view.accounts),
        "ha_assets": view.ha_assets,
        "api": api_stats(view.api_level, view.api_total, view.api_errors, view.api_inflight),
    }


def _consumer_entries(infos: Sequence[Mapping[str, Any]], with_config: bool) -> list[Any]:
    if with_config:
        return [dict(ci) for ci in infos]
    return [{k: v for k, v in ci.items() if k != "config"} for ci in infos]


def stream_detail(sv: StreamView, opts: JszOptions, server_name: str) -> dict[str, Any] | None:
    """A StreamDetail object, or None when ``stream-leader-only`` skips it."""
    if opts.stream_leader_only and sv.cluster is not None:
        if sv.cluster.get("leader") != server_name:
            return None
    d: dict[str, Any] = {"name": sv.name, "created": rfc3339_ns(sv.created_ns)}
    if sv.cluster is not None:
        d["cluster"] = dict(sv.cluster)
    if opts.config:
        d["config"] = dict(sv.config())
    d["state"] = state_dict(sv.state, consumer_count=sv.consumer_count)
    if opts.consumers:
        if sv.consumers:
            d["consumer_detail"] = _consumer_entries(sv.consumers, opts.config)
        if opts.direct_consumers and sv.direct_consumers:
            d["direct_consumer_detail"] = _consumer_entries(sv.direct_consumers, opts.config)
    if sv.mirror is not None:
        d["mirror"] = dict(sv.mirror)
    if sv.sources:
        d["sources"] = [dict(s) for s in sv.sources]
    if opts.raft and sv.raft_group:
        d["stream_raft_group"] = sv.raft_group
        groups = [
            {"name": c.get("name", ""), "raft_group": sv.consumer_raft_groups[c.get("name", "")]}
            for c in sv.consumers
            if opts.consumers and c.get("name", "") in sv.consumer_raft_groups
        ]
        if groups:
            d["consumer_raft_groups"] = groups
    return d


def account_detail(acc: AccountView, opts: JszOptions, server_name: str) -> dict[str, Any]:
    """An AccountDetail object (``stream_detail`` only with ``streams``)."""
    d: dict[str, Any] = {
        "name": acc.name,
        "id": acc.name,
        "memory": acc.memory,
        "storage": acc.storage,
        "reserved_memory": acc.max_memory % UINT64_MOD,
        "reserved_storage": acc.max_storage % UINT64_MOD,
        "accounts": 0,
        "ha_assets": 0,
        "api": api_stats(0, acc.api_total, acc.api_errors),
    }
    if opts.streams:
        details = [stream_detail(sv, opts, server_name) for sv in acc.streams]
        kept = [x for x in details if x is not None]
        if kept:
            d["stream_detail"] = kept
    return d


def _selected(view: JetStreamView, opts: JszOptions) -> list[AccountView]:
    for acc in view.accounts:
        if opts.account and acc.name == opts.account:
            return [acc]
    if not opts.accounts:
        return []
    accounts = list(view.accounts)
    if opts.limit > 0:
        accounts.sort(key=lambda a: a.name)
        accounts = accounts[min(opts.offset, len(accounts)) :][: opts.limit]
    return accounts


def jsz(
    server: Any,
    query: Query | None = None,
    *,
    now: float | None = None,
    js_config: Mapping[str, Any] | None = None,
    js_limits: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``/jsz`` document.

    Args:
        server: the server (``cfg.jetstream``, ``server_id``, ``server_name``,
            the optional ``jetstream_view()`` hook).
        query: the decoded query string.
        now: wall-clock seconds for ``now`` (the server's clock if None).
        js_config: the JetStreamConfig object to report (resolved defaults).
        js_limits: the server's JetStream limits (``JSLimitOpts``) to report.

    Raises:
        MonitorError: 400 for a bad parameter, or with ``leader-only`` on a
            server that is not the meta leader (or has JetStream off).
    """
    opts = JszOptions.parse(query or Query())
    now = server.wall_time() if now is None else now
    enabled = server.cfg.jetstream.enabled
    hook = getattr(server, "jetstream_view", None)
    view: JetStreamView | None = hook() if enabled and callable(hook) else None
    if opts.leader_only and (not enabled or (view is not None and not view.leader)):
        raise MonitorError(400, "filtered response: not leader")
    if view is None:
        view = JetStreamView(accounts=(AccountView("$G"),) if enabled else ())
    doc = jetstream_stats(view)
    doc["server_id"] = server.server_id
    doc["now"] = go_time(now)
    if not enabled:
        doc["disabled"] = True
        doc["config"] = {"max_memory": 0, "max_storage": 0}
    else:
        doc["config"] = dict(js_config or {})
        doc["limits"] = dict(js_limits or {})
    streams = [sv for acc in view.accounts for sv in acc.streams]
    doc["streams"] = len(streams)
    if opts.raft:
        led = sum(1 for sv in streams if sv.leader)
        if led:
            doc["streams_leader"] = led
    doc["consumers"] = sum(sv.consumer_count for sv in streams)
    if opts.raft:
        led = sum(sv.consumers_led for sv in streams)
        if led:
            doc["consumers_leader"] = led
    doc["messages"] = sum(sv.state.msgs for sv in streams)
    doc["bytes"] = sum(sv.state.bytes for sv in streams)
    if view.meta is not None:
        doc["meta_cluster"] = dict(view.meta)
    selected = _selected(view, opts)
    if selected:
        doc["account_details"] = [account_detail(a, opts, server.server_name) for a in selected]
    doc["total"] = len(view.accounts)
    return doc
