"""``$JS.API.STREAM.*`` handlers: CREATE, UPDATE, INFO, DELETE, NAMES, LIST, PURGE.

Theory of operation: each handler checks the request in nats-server's order
(body shape, strict Go decoding with 10025 ``invalid JSON: …``, field
combinations, then the stream) before anything changes, and only then asks
the facade (``cluster.api``); what depends on stream state (deny_purge,
sealed, the purge itself) is decided in the stream's apply.  Answers are
shaped as nats-server's Go response structs write them: error answers of
paged calls keep their zero ``total``/``offset``/``limit`` (and NAMES its
``"streams":null``, LIST ``"streams":[]``), PURGE errors ``"purged":0``.
StreamInfo carries ``cluster`` only in INFO answers (a single nats-server
2.15 leaves it out of CREATE, UPDATE and LIST); CREATE, UPDATE and INFO show
the dynamic ``_nats.ver``/``_nats.level`` metadata, LIST the stored keys
only (``node.jsapi.versioning``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from cluster.api import StreamNotFound
from cluster.model import Storage, StreamConfig
from cluster.placement import NoPlacement, stepdown_target
from cluster.stream_fsm import ApiErrorResult, PurgeResult
from cluster.streams import Stream
from node.jetstream import apireq, clustered
from node.jetstream.common import (
    TYPE,
    ApiAnswer,
    ApiRequest,
    dumps,
    error,
)
from node.jsapi import render
from node.jsapi.errors import (
    BAD_REQUEST,
    CLUSTER_NO_PEERS,
    NOT_EMPTY_REQUEST,
    STREAM_NOT_FOUND,
    JSApiError,
)
from node.subjects import overlaps
from node.version import NATS_VERSION
from store.api import StreamState

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

NAMES_PAGE = 1024
LIST_PAGE = 256
SUBJECTS_PAGE = 100_000
"""Most subjects one STREAM.INFO lists (nats-server ``JSMaxSubjectDetails``)."""
DELETE_RESPONSE = TYPE + "stream_delete_response"
NAMES_RESPONSE = TYPE + "stream_names_response"
PURGE_RESPONSE = TYPE + "stream_purge_response"


def stream_of(svc: JetStreamService, name: str, type_: str) -> Stream:
    """The stream ``name`` or the 404/10059 answer."""
    try:
        return svc.api.stream(name)
    except StreamNotFound:
        raise error(type_, JSApiError(STREAM_NOT_FOUND)) from None


def info_dict(
    svc: JetStreamService,
    stream: Stream,
    *,
    paging: tuple[int, int, int] | None = None,
    state: StreamState | None = None,
    cluster: bool = False,
    versioned: bool = True,
) -> dict[str, Any]:
    """StreamInfo of ``stream`` as this server reports it.

    Args:
        svc: the service.
        stream: the stream.
        paging: ``(total, offset, limit)`` of the subjects listed (INFO only).
        state: the state to report (default: the store's plain state).
        cluster: add ``{"leader": <server name>}`` (INFO answers).
        versioned: show ``_nats.ver``/``_nats.level`` in the config's
            metadata (create, update and info answers; not LIST).
    """
    return render.stream_info_dict(
        stream.cfg,
        state if state is not None else stream.store.state(),
        created_ns=stream.created_ns,
        ts_ns=time.time_ns(),
        consumer_count=svc.consumer_count(stream.cfg.name),
        cluster=svc.cluster_block(stream) if cluster or svc.clustered else None,
        mirror=svc.api.sourcing.mirror_info(stream.cfg.name),
        sources=svc.api.sourcing.sources_info(stream.cfg.name),
        domain=svc.domain,
        paging=paging,
        version=NATS_VERSION if versioned else "",
    )


async def create(svc: JetStreamService, req: ApiRequest) -> str | None:
    return await clustered.create(svc, req)


async def update(svc: JetStreamService, req: ApiRequest) -> str | None:
    return await clustered.update(svc, req)


async def apply_update(svc: JetStreamService, old: StreamConfig, cfg: StreamConfig) -> Stream:
    """Give the local stream its new (validated) config and capture."""
    await svc.api.update_stream(cfg)
    stream = svc.api.stream(cfg.name)
    if cfg.subjects != old.subjects or cfg.allow_direct != old.allow_direct:
        svc.recapture(stream)
    return stream


async def info(svc: JetStreamService, req: ApiRequest) -> str:
    """STREAM.INFO: optional ``deleted_details``, ``subjects_filter`` with ``offset``."""
    type_ = render.STREAM_INFO_RESPONSE
    zero_paging = {"total": 0, "offset": 0, "limit": 0}
    req_ = {}
    if apireq.is_json_object_or_array(req.body):
        try:
            req_ = apireq.decode(req.body, apireq.STREAM_INFO)
        except JSApiError as err:
            raise ApiAnswer(render.error_response_with(type_, err, zero_paging)) from None
    try:
        stream = svc.api.stream(req.op[2])
    except StreamNotFound:
        missing = JSApiError(STREAM_NOT_FOUND)
        raise ApiAnswer(render.error_response_with(type_, missing, zero_paging)) from None
    details = req_.get("deleted_details", False)
    filt = req_.get("subjects_filter", "")
    state = stream.store.state(deleted_details=details, subjects_filter=filt or None)
    if details and state.first_seq == state.last_seq == 0 and stream.cfg.storage is Storage.FILE:
        # nats-server's file store counts the never-written stream's "sequence 0"
        # as deleted when asked for details (its memory store does not)
        state = dataclasses.replace(state, num_deleted=1, deleted=(0,))
    paging = (0, 0, 0)
    if filt and state.subjects:
        state, paging = _subjects_page(state, max(req_.get("offset", 0), 0))
    else:
        state = dataclasses.replace(state, subjects=None)
    info = info_dict(svc, stream, paging=paging, state=state, cluster=True)
    return render.stream_info_response(info)


def _subjects_page(state: StreamState, offset: int) -> tuple[StreamState, tuple[int, int, int]]:
    """One page of the subject counts (sorted by subject past the first page).

    The answer's ``offset`` is the one asked for, even past the end (then no
    ``subjects`` are listed), as nats-server reports it.
    """
    counts = state.subjects or {}
    total = len(counts)
    if offset == 0 and total <= SUBJECTS_PAGE:
        return state, (total, 0, SUBJECTS_PAGE)
    names = sorted(counts)[offset : offset + SUBJECTS_PAGE]
    page = {n: counts[n] for n in names} or None
    return dataclasses.replace(state, subjects=page), (total, offset, SUBJECTS_PAGE)


async def delete(svc: JetStreamService, req: ApiRequest) -> str:
    """STREAM.DELETE: the body must be empty (or an empty JSON object)."""
    if not apireq.is_empty_request(req.body):
        raise error(DELETE_RESPONSE, JSApiError(NOT_EMPTY_REQUEST))
    return await clustered.delete(svc, req)


async def remove_local(svc: JetStreamService, stream: Stream) -> None:
    """Stop a local stream, remove its data and consumers; advisories
    (``CONSUMER.DELETED`` for each consumer, then ``STREAM.DELETED``, as
    nats-server) from the server that speaks for it — its host, or the leader
    of a replicated stream — so each goes out once cluster-wide."""
    cfg = stream.cfg
    speaks = stream.replicated is None or stream.is_leader
    svc.release(cfg.name)
    if svc.consumers is not None:
        if speaks:
            for c in list(svc.consumers.of(cfg.name).values()):
                svc.consumers.action(c, "delete")
        svc.consumers.drop_stream(cfg.name)  # before the store closes under them
    await svc.api.delete_stream(cfg.name)
    svc.resources.forget(cfg.name)
    if speaks:
        svc.advisories.stream_action("delete", cfg.name, cfg)


def _paging(body: bytes, request: apireq.Request, type_: str, empty: Any) -> tuple[int, str]:
    """``(offset, subject filter)`` of a NAMES/LIST request."""
    if not apireq.is_json_object_or_array(body):
        return 0, ""
    try:
        req = apireq.decode(body, request)
    except JSApiError as err:
        tail = {"total": 0, "offset": 0, "limit": 0, "streams": empty}
        raise ApiAnswer(render.error_response_with(type_, err, tail)) from None
    return max(req.get("offset", 0), 0), req.get("subject", "")


def _matching(svc: JetStreamService, subject: str) -> list[StreamConfig]:
    """Configs of the streams (by name) with a subject that collides with
    ``subject`` ("" = all): the cluster's in a cluster, else this server's."""
    configs = svc.all_configs()
    found = [configs[n] for n in sorted(configs)]
    if not subject:
        return found
    s = subject.encode()
    return [c for c in found if any(overlaps(s, y.encode()) for y in c.subjects)]


async def names(svc: JetStreamService, req: ApiRequest) -> str:
    """STREAM.NAMES: ``offset`` and ``subject`` filter; no names is ``"streams":null``."""
    offset, subject = _paging(req.body, apireq.STREAM_NAMES, NAMES_RESPONSE, None)
    streams = _matching(svc, subject)
    offset = min(offset, len(streams))
    page = [c.name for c in streams[offset : offset + NAMES_PAGE]]
    return dumps(
        {
            "type": NAMES_RESPONSE,
            "total": len(streams),
            "offset": offset,
            "limit": NAMES_PAGE,
            "streams": page or None,
        }
    )


async def list_(svc: JetStreamService, req: ApiRequest) -> str:
    """STREAM.LIST: like NAMES with StreamInfos; no streams is ``"streams":[]``."""
    type_ = render.STREAM_LIST_RESPONSE
    offset, subject = _paging(req.body, apireq.STREAM_LIST, type_, [])
    streams = _matching(svc, subject)
    offset = min(offset, len(streams))
    page = streams[offset : offset + LIST_PAGE]
    infos, missing = await clustered.gather_infos(svc, [c.name for c in page])
    return render.stream_list_response(
        infos, total=len(streams), offset=offset, limit=LIST_PAGE, missing=missing
    )


def _purge_error(err: JSApiError) -> ApiAnswer:
    return ApiAnswer(render.error_response_with(PURGE_RESPONSE, err, {"purged": 0}))


async def purge(svc: JetStreamService, req: ApiRequest) -> str:
    """STREAM.PURGE: all, or by ``filter``, below ``seq``, keeping ``keep``.

    A body that is not a JSON object or array (``x``, ``null``) purges
    everything, as in nats-server; ``seq`` with ``keep`` is 10003.
    """
    body: dict[str, Any] = {}
    if apireq.is_json_object_or_array(req.body):
        try:
            body = apireq.decode(req.body, apireq.PURGE)
        except JSApiError as err:
            raise _purge_error(err) from None
        if body.get("seq", 0) > 0 and body.get("keep", 0) > 0:
            raise _purge_error(JSApiError(BAD_REQUEST))
    try:
        stream = svc.api.stream(req.op[2])
    except StreamNotFound:
        raise _purge_error(JSApiError(STREAM_NOT_FOUND)) from None
    result = await stream.purge(
        body.get("filter") or None, body.get("seq") or None, body.get("keep") or None
    )
    if isinstance(result, PurgeResult):
        return dumps({"type": PURGE_RESPONSE, "success": True, "purged": result.purged})
    if not isinstance(result, ApiErrorResult):
        raise TypeError(f"unexpected purge result {result!r}")
    refused = {"code": result.code, "err_code": result.err_code, "description": result.description}
    raise ApiAnswer(dumps({"type": PURGE_RESPONSE, "error": refused, "purged": 0}))


STEPDOWN_RESPONSE = TYPE + "stream_leader_stepdown_response"


async def leader_stepdown(svc: JetStreamService, req: ApiRequest) -> str:
    """STREAM.LEADER.STEPDOWN: the leader hands over (to ``placement.preferred``
    or a peer matching ``placement`` when given) and answers at once, before
    the election ends, as nats-server does; an R1 stream answers success and
    nothing changes."""
    body = stepdown_request(req.body, STEPDOWN_RESPONSE)
    stream = stream_of(svc, req.op[3], STEPDOWN_RESPONSE)
    return step_down(svc, stream, body, STEPDOWN_RESPONSE)


def stepdown_request(body: bytes, type_: str) -> dict[str, Any]:
    """A leader stepdown body as nats-server reads it: decoded strictly
    (10025 with Go's message) when it starts as a JSON object or array,
    anything else (``null``, text) is no body."""
    if not apireq.is_json_object_or_array(body):
        return {}
    try:
        return apireq.decode(body, apireq.LEADER_STEPDOWN)
    except JSApiError as err:
        raise error(type_, err) from None


def step_down(svc: JetStreamService, stream: Stream, body: dict[str, Any], type_: str) -> str:
    """Hand ``stream``'s lead over as a stepdown request ``body`` asks
    (answered at once; errors as ``type_``)."""
    rg = stream.replicated
    if rg is None or svc.meta is None or len(rg.members) < 2:
        # R1 (a stream scaled down to one keeps a one-member group): nothing moves
        return dumps({"type": type_, "success": True})
    placement = body.get("placement") if isinstance(body.get("placement"), dict) else {}
    tags = placement.get("tags") if isinstance(placement.get("tags"), list) else []
    target = stepdown_target(
        svc.server.server_name,
        svc.meta.specs(rg.members),
        preferred=placement.get("preferred") or None,
        cluster=placement.get("cluster") or None,
        tags=tuple(str(t) for t in tags),
        rng=svc.meta.rng,
    )
    if isinstance(target, NoPlacement):
        raise error(type_, JSApiError(CLUSTER_NO_PEERS, err=target.description))
    svc.api.nursery.start_soon(rg.step_down, target)
    return dumps({"type": type_, "success": True})
