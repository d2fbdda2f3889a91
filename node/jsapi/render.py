"""JetStream API response JSON, byte-for-byte as nats-server writes it.

Theory of operation
-------------------
Pure functions from values to ``str`` (UTF-8 JSON text).  Key order follows
nats-server's Go structs; Go's encoder is imitated by ``go_json`` (compact,
``<``/``>``/``&`` escaped as ``\\u003c``/``\\u003e``/``\\u0026``, map keys
sorted).  Timestamps are RFC3339 UTC with nanoseconds, trailing zeros
trimmed, ``0001-01-01T00:00:00Z`` for the zero time (Go ``time.Time`` with
``RFC3339Nano``); we take integer nanoseconds since the Unix epoch, 0 meaning
the zero time.

Shapes (nats-server 2.15, which trijet echoes):

* ``config``: ``StreamConfig.to_dict()``; create, info and update answers
  (``version`` given) add the dynamic ``_nats.ver``/``_nats.level`` keys
  to its ``metadata`` (``versioning``), LIST shows only the stored ones.
* ``state``: ``messages, bytes, first_seq, first_ts, last_seq, last_ts,
  [num_subjects], [subjects], [num_deleted], [deleted], consumer_count``.
* stream info (INFO/UPDATE/LIST item): ``[type], [total, offset, limit],
  config, created, state, [cluster], [mirror], [sources], [domain], ts``;
  create adds ``did_create``.
* PubAck: ``{"stream":"X",["domain":"D",]"seq":N[,"duplicate": true]}`` —
  note nats-server's hand-written ``"duplicate": true`` with a space.
* errors: ``{"type":"…","error":{"code":…,"err_code":…,"description":"…"}}``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from cluster.model import StreamConfig
from node.jsapi import versioning
from node.jsapi.errors import JSApiError, go_json
from store.api import StoredMsg, StreamState

__all__ = [
    "API_TYPE_PREFIX",
    "STREAM_CREATE_RESPONSE",
    "STREAM_INFO_RESPONSE",
    "STREAM_LIST_RESPONSE",
    "STREAM_UPDATE_RESPONSE",
    "config_dict",
    "config_json",
    "direct_get_headers",
    "error_response",
    "error_response_with",
    "pub_ack",
    "pub_ack_error",
    "rfc3339_ns",
    "state_dict",
    "stream_create_response",
    "stream_info_dict",
    "stream_info_response",
    "stream_list_response",
    "stream_msg_get_response",
    "stream_update_response",
]

API_TYPE_PREFIX = "io.nats.jetstream.api.v1."
STREAM_CREATE_RESPONSE = API_TYPE_PREFIX + "stream_create_response"
STREAM_UPDATE_RESPONSE = API_TYPE_PREFIX + "stream_update_response"
STREAM_INFO_RESPONSE = API_TYPE_PREFIX + "stream_info_response"
STREAM_LIST_RESPONSE = API_TYPE_PREFIX + "stream_list_response"
STREAM_MSG_GET_RESPONSE = API_TYPE_PREFIX + "stream_msg_get_response"

_ZERO_TIME = "0001-01-01T00:00:00Z"
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def rfc3339_ns(ts_ns: int) -> str:
    """Go ``time.Time`` JSON for Unix nanoseconds (0 -> the zero time)."""
    if ts_ns == 0:
        return _ZERO_TIME
    secs, nanos = divmod(ts_ns, 1_000_000_000)
    dt = _EPOCH + datetime.timedelta(seconds=secs)
    # the year always has four digits (strftime's %Y does not pad years before 1000)
    text = f"{dt.year:04d}-" + dt.strftime("%m-%dT%H:%M:%S")
    if nanos:
        text += "." + f"{nanos:09d}".rstrip("0")
    return text + "Z"


def config_dict(cfg: StreamConfig, *, version: str = "") -> dict[str, Any]:
    """The ``config`` object (nats-server key order and omission rules).

    Args:
        cfg: the stored config.
        version: the server version to show in ``_nats.ver`` (with
            ``_nats.level``); "" shows the stored metadata only.
    """
    if version:
        meta = versioning.with_dynamic(dict(cfg.metadata), version)
        cfg = dataclasses.replace(cfg, metadata=tuple(meta.items()))
    return cfg.to_dict()


def config_json(cfg: StreamConfig) -> str:
    """``config_dict`` as Go writes it."""
    return go_json(config_dict(cfg))


def state_dict(state: StreamState, *, consumer_count: int = 0) -> dict[str, Any]:
    """StreamState JSON: ``num_subjects``/``num_deleted`` omitted when 0,
    ``subjects``/``deleted`` only when present in ``state``.
    """
    d: dict[str, Any] = {
        "messages": state.msgs,
        "bytes": state.bytes,
        "first_seq": state.first_seq,
        "first_ts": rfc3339_ns(state.first_ts),
        "last_seq": state.last_seq,
        "last_ts": rfc3339_ns(state.last_ts),
    }
    if state.num_subjects:
        d["num_subjects"] = state.num_subjects
    if state.subjects:
        d["subjects"] = dict(sorted(state.subjects.items()))  # Go writes map keys sorted
    if state.num_deleted:
        d["num_deleted"] = state.num_deleted
    if state.deleted:
        d["deleted"] = list(state.deleted)
    d["consumer_count"] = consumer_count
    return d


def stream_info_dict(
    cfg: StreamConfig,
    state: StreamState,
    *,
    created_ns: int,
    ts_ns: int,
    consumer_count: int = 0,
    cluster: Mapping[str, Any] | None = None,
    mirror: Mapping[str, Any] | None = None,
    sources: Sequence[Mapping[str, Any]] | None = None,
    domain: str = "",
    paging: tuple[int, int, int] | None = None,
    version: str = "",
) -> dict[str, Any]:
    """A StreamInfo object.

    Args:
        cfg: The stream's config.
        state: The store's state.
        created_ns: Creation time (Unix ns).
        ts_ns: Server time of this snapshot (Unix ns).
        consumer_count: Consumers on the stream.
        cluster: ``{"leader":…}`` or the clustered form; omitted when None.
        mirror: Mirror info (``{"name","lag","active",…}``).
        sources: Source infos.
        domain: JetStream domain; omitted when empty.
        paging: ``(total, offset, limit)`` for INFO responses.
        version: show the dynamic versioning metadata (see ``config_dict``).
    """
    d: dict[str, Any] = {}
    if paging is not None:
        d["total"], d["offset"], d["limit"] = paging
    d["config"] = config_dict(cfg, version=version)
    d["created"] = rfc3339_ns(created_ns)
    d["state"] = state_dict(state, consumer_count=consumer_count)
    if cluster is not None:
        d["cluster"] = dict(cluster)
    if mirror is not None:
        d["mirror"] = dict(mirror)
    if sources:
        d["sources"] = [dict(s) for s in sources]
    if domain:
        d["domain"] = domain
    d["ts"] = rfc3339_ns(ts_ns)
    return d


def _with_type(type_: str, body: Mapping[str, Any]) -> str:
    return go_json({"type": type_, **body})


def stream_create_response(info: Mapping[str, Any], *, did_create: bool = True) -> str:
    """STREAM.CREATE success: StreamInfo (no paging) + ``"did_create":true``
    (left out when a clustered create found the stream already there)."""
    return _with_type(STREAM_CREATE_RESPONSE, {**info, "did_create": True} if did_create else info)


def stream_update_response(info: Mapping[str, Any]) -> str:
    """STREAM.UPDATE success: StreamInfo (no paging)."""
    return _with_type(STREAM_UPDATE_RESPONSE, info)


def stream_info_response(info: Mapping[str, Any]) -> str:
    """STREAM.INFO success: StreamInfo built with ``paging=(total, offset, limit)``."""
    return _with_type(STREAM_INFO_RESPONSE, info)


def stream_list_response(
    infos: Sequence[Mapping[str, Any]],
    *,
    total: int,
    offset: int,
    limit: int,
    missing: Sequence[str] = (),
) -> str:
    """STREAM.LIST: ``total, offset, limit, streams[, missing]`` (``streams`` is ``[]`` when empty)."""
    body: dict[str, Any] = {
        "total": total,
        "offset": offset,
        "limit": limit,
        "streams": [dict(i) for i in infos],
    }
    if missing:
        body["missing"] = list(missing)
    return _with_type(STREAM_LIST_RESPONSE, body)


def error_response(type_: str, err: JSApiError) -> str:
    """``{"type":…,"error":{…}}`` for any API response type."""
    return _with_type(type_, {"error": err.to_dict()})


def error_response_with(type_: str, err: JSApiError, tail: Mapping[str, Any]) -> str:
    """An error answer whose Go response struct also writes fields without
    ``omitempty`` (``tail``, in struct order) after ``error``: e.g. INFO's
    ``"total":0,"offset":0,"limit":0`` or PURGE's ``"purged":0``.
    """
    return _with_type(type_, {"error": err.to_dict(), **tail})


def stream_msg_get_response(msg: StoredMsg, *, headers: bool = True) -> str:
    """STREAM.MSG.GET success: ``{"type","message":{"subject","seq",["hdrs"],["data"],"time"}}``.

    ``hdrs`` (the raw header block) and ``data`` are base64, each omitted
    when empty; ``headers=False`` (``no_hdr``) leaves ``hdrs`` out.
    """
    m: dict[str, Any] = {"subject": msg.subject, "seq": msg.seq}
    if headers and msg.headers:
        m["hdrs"] = base64.b64encode(msg.headers).decode()
    if msg.payload:
        m["data"] = base64.b64encode(msg.payload).decode()
    m["time"] = rfc3339_ns(msg.ts_ns)
    return _with_type(STREAM_MSG_GET_RESPONSE, {"message": m})


def direct_get_headers(
    stream: str, msg: StoredMsg, *, pending: int | None = None, last_seq: int = 0
) -> bytes:
    """The header block of a direct-get reply: the stored headers (if any)
    followed by ``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence``,
    ``Nats-Time-Stamp`` (RFC 3339 with nanoseconds) and, for batch replies
    (``pending`` given), ``Nats-Num-Pending`` and ``Nats-Last-Sequence``.
    """
    lines = [
        ("Nats-Stream", stream),
        ("Nats-Subject", msg.subject),
        ("Nats-Sequence", str(msg.seq)),
        ("Nats-Time-Stamp", rfc3339_ns(msg.ts_ns)),
    ]
    if pending is not None:
        lines += [("Nats-Num-Pending", str(pending)), ("Nats-Last-Sequence", str(last_seq))]
    head = msg.headers[:-2] if len(msg.headers) > 2 else b"NATS/1.0\r\n"
    tail = b"".join(k.encode() + b": " + _header_value(v) + b"\r\n" for k, v in lines)
    return head + tail + b"\r\n"


def _header_value(value: str) -> bytes:
    """Go's ``http.Header.Write``: newlines become spaces, ends trimmed."""
    return value.replace("\r", " ").replace("\n", " ").strip(" \t").encode()


def pub_ack(stream: str, seq: int, *, duplicate: bool = False, domain: str = "") -> str:
    """PubAck bytes as nats-server 2.12+ writes them (``"duplicate": true`` keeps its space)."""
    text = '{"stream":' + go_json(stream)
    if domain:
        text += ',"domain":' + go_json(domain)
    text += f',"seq":{seq}'
    if duplicate:
        text += ',"duplicate": true'
    return text + "}"


def pub_ack_error(err: JSApiError, *, stream: str = "", seq: int = 0) -> str:
    """A failed publish: ``{"error":{…},"stream":"X","seq":0}`` (``stream`` omitted when empty)."""
    d: dict[str, Any] = {"error": err.to_dict()}
    if stream:
        d["stream"] = stream
    d["seq"] = seq
    return go_json(d)
