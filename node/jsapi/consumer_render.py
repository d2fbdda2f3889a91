"""ConsumerInfo and the consumer API responses, as nats-server writes them.

Theory of operation: pure functions from values to dicts/JSON text.  Key
order follows nats-server's ``ConsumerInfo``: ``stream_name, name, created,
config, delivered, ack_floor, num_ack_pending, num_redelivered, num_waiting,
num_pending, [push_bound], [paused, pause_remaining], ts``.  ``delivered``
and ``ack_floor`` are ``{consumer_seq, stream_seq[, last_active]}`` where
``last_active`` appears once something was delivered / acknowledged.  A
single server adds no ``cluster`` object to consumer info.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster.consumer_model import ConsumerConfig
from node.jsapi import versioning
from node.jsapi.errors import go_json
from node.jsapi.render import API_TYPE_PREFIX, rfc3339_ns

__all__ = [
    "CONSUMER_CREATE_RESPONSE",
    "CONSUMER_DELETE_RESPONSE",
    "CONSUMER_INFO_RESPONSE",
    "CONSUMER_LIST_RESPONSE",
    "CONSUMER_NAMES_RESPONSE",
    "CONSUMER_PAUSE_RESPONSE",
    "ConsumerFigures",
    "consumer_info_dict",
    "list_response",
    "names_response",
    "with_type",
]

CONSUMER_CREATE_RESPONSE = API_TYPE_PREFIX + "consumer_create_response"
CONSUMER_INFO_RESPONSE = API_TYPE_PREFIX + "consumer_info_response"
CONSUMER_DELETE_RESPONSE = API_TYPE_PREFIX + "consumer_delete_response"
CONSUMER_NAMES_RESPONSE = API_TYPE_PREFIX + "consumer_names_response"
CONSUMER_LIST_RESPONSE = API_TYPE_PREFIX + "consumer_list_response"
CONSUMER_PAUSE_RESPONSE = API_TYPE_PREFIX + "consumer_pause_response"


@dataclass(frozen=True, slots=True)
class ConsumerFigures:
    """The live numbers of a ConsumerInfo.

    Attributes:
        delivered_dseq / delivered_sseq: last consumer / stream sequence delivered.
        floor_dseq / floor_sseq: the ack floor.
        last_delivered_ns / last_ack_ns: 0 = never (no ``last_active``).
        push_bound: None for pull consumers; for push, whether bound.
        pause_remaining_ns: None when not paused.
    """

    delivered_dseq: int = 0
    delivered_sseq: int = 0
    floor_dseq: int = 0
    floor_sseq: int = 0
    last_delivered_ns: int = 0
    last_ack_ns: int = 0
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    num_pending: int = 0
    push_bound: bool | None = None
    pause_remaining_ns: int | None = None
    #: the pin of a ``pinned_client`` consumer ("" none) and when it was given
    pinned_id: str = ""
    pinned_ns: int = 0


def _seq_info(dseq: int, sseq: int, last_ns: int) -> dict[str, Any]:
    d: dict[str, Any] = {"consumer_seq": dseq, "stream_seq": sseq}
    if last_ns:
        d["last_active"] = rfc3339_ns(last_ns)
    return d


def consumer_info_dict(
    stream: str,
    name: str,
    cfg: ConsumerConfig,
    *,
    created_ns: int,
    figures: ConsumerFigures,
    ts_ns: int,
    version: str = "",
    cluster: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """ConsumerInfo (without ``type``); ``cluster`` its cluster block, if any.

    ``version`` non-empty (create and info answers) adds the dynamic
    ``_nats.ver``/``_nats.level`` keys to the config's metadata; LIST shows
    the stored keys only (``versioning``).
    """
    if version:
        meta = versioning.with_dynamic(dict(cfg.metadata), version)
        cfg = dataclasses.replace(cfg, metadata=tuple(meta.items()))
    f = figures
    d: dict[str, Any] = {
        "stream_name": stream,
        "name": name,
        "created": rfc3339_ns(created_ns),
        "config": cfg.to_dict(),
        "delivered": _seq_info(f.delivered_dseq, f.delivered_sseq, f.last_delivered_ns),
        "ack_floor": _seq_info(f.floor_dseq, f.floor_sseq, f.last_ack_ns),
        "num_ack_pending": f.num_ack_pending,
        "num_redelivered": f.num_redelivered,
        "num_waiting": f.num_waiting,
        "num_pending": f.num_pending,
    }
    if cluster is not None:
        d["cluster"] = cluster
    if f.push_bound:
        d["push_bound"] = True
    if f.pause_remaining_ns is not None:
        d["paused"] = True
        d["pause_remaining"] = f.pause_remaining_ns
    d["ts"] = rfc3339_ns(ts_ns)
    if cfg.priority_groups:  # nats-server shows the first group's state only
        group: dict[str, Any] = {"group": cfg.priority_groups[0]}
        if f.pinned_id:
            group["pinned_client_id"] = f.pinned_id
        group["pinned_ts"] = rfc3339_ns(f.pinned_ns)
        d["priority_groups"] = [group]
    return d


def with_type(type_: str, body: Mapping[str, Any]) -> str:
    """``{"type":…, …body}`` as Go-encoded JSON."""
    return go_json({"type": type_, **body})


def names_response(names: Sequence[str], *, total: int, offset: int, limit: int) -> str:
    """CONSUMER.NAMES: ``consumers`` is ``[]`` when empty."""
    body = {"total": total, "offset": offset, "limit": limit, "consumers": list(names)}
    return with_type(CONSUMER_NAMES_RESPONSE, body)


def list_response(
    infos: Sequence[Mapping[str, Any]], *, total: int, offset: int, limit: int
) -> str:
    """CONSUMER.LIST: ``consumers`` is ``[]`` when empty."""
    body = {
        "total": total,
        "offset": offset,
        "limit": limit,
        "consumers": [dict(i) for i in infos],
    }
    return with_type(CONSUMER_LIST_RESPONSE, body)
