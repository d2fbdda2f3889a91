"""What a node's JetStream service reports about itself: the ``/jsz`` /
``/varz`` view (``stats_view``) and the ``$JS.API.INFO`` answer
(``account_info``).

Usage is the sum of the streams' stored bytes by storage type, reservations
the sum of their ``max_bytes``; consumer infos for ``/jsz?consumers=true``
are built only when read (``_LazyInfos``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from node.jetstream import clustered, consumers_api
from node.jetstream.common import TYPE, ApiRequest, dumps
from node.monitor.jsz import AccountView, JetStreamView, StreamView, api_stats
from node.version import JS_API_LEVEL
from store.errors import StoreError

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

log = logging.getLogger(__name__)


def stats_view(self: JetStreamService) -> JetStreamView:
    """Figures for ``/jsz``, ``/varz`` and ``$JS.API.INFO``.

    Usage is the sum of the streams' stored bytes by storage type;
    reservations the sum of their ``max_bytes`` (when set) by storage
    type, as nats-server reserves them, in the one account JetStream
    runs in.
    """
    server = self.server
    cluster: dict[str, Any] = {}
    if server.cfg.cluster is not None and server.cfg.cluster.name:
        cluster["name"] = server.cfg.cluster.name
    cluster["leader"] = server.server_name
    used = {"memory": 0, "file": 0}
    reserved = {"memory": 0, "file": 0}
    views = []
    for stream in self.api.streams.values() if self.api else ():
        cfg = stream.cfg
        state = stream.store.state()
        kind = "memory" if cfg.storage.value == "memory" else "file"
        used[kind] += state.bytes
        if cfg.max_bytes > 0:
            reserved[kind] += cfg.max_bytes
        sa = self.meta.assignment(cfg.name) if self.meta is not None else None
        views.append(
            StreamView(
                name=cfg.name,
                created_ns=stream.created_ns,
                state=state,
                config=cfg.to_dict,
                consumer_count=self.consumer_count(cfg.name),
                cluster=cluster if stream.replicated is None else self.cluster_block(stream),
                raft_group=sa.group if sa is not None else "",
                leader=stream.is_leader,
                consumers=_LazyInfos(self, cfg.name),
            )
        )
    account = AccountView(
        self.account.name,
        memory=used["memory"],
        storage=used["file"],
        api_total=self.api_total,
        api_errors=self.api_errors,
        streams=views,
    )
    meta = self.meta
    return JetStreamView(
        # R>1 groups hosted here and the meta group, counted by the service that runs
        # it (the home account's: the views are summed over accounts; R1 streams do
        # not count)
        ha_assets=(int(meta.runs_layer) + sum(1 for s in self.api.streams.values() if s.replicated))
        if meta is not None and self.api is not None
        else 0,
        meta=meta.cluster_info() if meta is not None else None,
        leader=meta.is_leader if meta is not None else True,
        memory=used["memory"],
        storage=used["file"],
        reserved_memory=reserved["memory"],
        reserved_storage=reserved["file"],
        api_level=JS_API_LEVEL,
        api_total=self.api_total,
        api_errors=self.api_errors,
        api_inflight=self.api_inflight,
        accounts=(account,),
    )


class _LazyInfos(Sequence[Any]):
    """The ConsumerInfos of a stream's consumers as this server holds them
    (``/jsz?consumers=true``), built only when read."""

    def __init__(self, svc: JetStreamService, stream: str) -> None:
        self._svc, self._stream = svc, stream
        self._infos: list[Any] | None = None

    def _all(self) -> list[Any]:
        if self._infos is None:
            svc = self._svc
            cs = svc.consumers.of(self._stream).values() if svc.consumers is not None else ()
            infos = []
            for c in cs:
                try:
                    infos.append(consumers_api.info_dict(svc, c, versioned=False))
                except StoreError:  # its stream's store fails: left out, /jsz still answers
                    log.exception("event=consumer_info_failed consumer=%s", c.name)
            self._infos = infos
        return self._infos

    def __len__(self) -> int:
        return len(self._all())

    def __getitem__(self, i: Any) -> Any:
        return self._all()[i]


async def account_info(svc: JetStreamService, req: ApiRequest) -> str:
    """``$JS.API.INFO``: the account's usage, limits and API counters.

    The API counters are read before this request is counted, as
    nats-server does (the first INFO reports ``total`` 0).
    """
    view = svc.stats()
    if svc.meta is not None:  # the whole cluster's streams (asked of every server)
        usage = await clustered.cluster_usage(svc)
        n_streams = len(svc.meta.configs())
    else:
        usage = clustered.local_usage(svc)
        n_streams = sum(len(acc.streams) for acc in view.accounts)
    body: dict[str, Any] = {
        "type": TYPE + "account_info_response",
        "memory": usage["memory"],
        "storage": usage["storage"],
        "reserved_memory": usage["reserved_memory"],
        "reserved_storage": usage["reserved_storage"],
        "streams": n_streams,
        "consumers": usage["consumers"],
        "limits": svc.limits.to_dict(),
    }
    if svc.domain:
        body["domain"] = svc.domain
    # every request is answered by one server: the cluster's counts are the sum
    body["api"] = api_stats(view.api_level, usage["api_total"], usage["api_errors"])
    return dumps(body)
