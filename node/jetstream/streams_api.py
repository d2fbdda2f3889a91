"""``$JS.API.STREAM.*`` handlers: CREATE, UPDATE, INFO, DELETE, NAMES, LIST, PURGE.

Each validates the request as nats-server does (``node.jsapi.streamconfig``)
before anything changes, then asks the facade (``cluster.api``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cluster.api import StreamNotFound
from cluster.stream_fsm import ApiErrorResult, PurgeResult
from cluster.streams import Stream
from node.jetstream.common import TYPE, ApiAnswer, ApiRequest, dumps, error, json_object
from node.jsapi import render
from node.jsapi.errors import (
    BAD_REQUEST,
    INVALID_JSON,
    NOT_EMPTY_REQUEST,
    STREAM_NOT_FOUND,
    JSApiError,
)
from node.jsapi.streamconfig import (
    check_overlap,
    check_recreate,
    check_update,
    parse_create,
    parse_update,
)
from node.subjects import overlaps

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

NAMES_PAGE = 1024
LIST_PAGE = 256
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
    svc: JetStreamService, stream: Stream, *, paging: tuple[int, int, int] | None = None
) -> dict[str, Any]:
    """StreamInfo of ``stream`` as this server reports it."""
    return render.stream_info_dict(
        stream.cfg,
        stream.store.state(),
        created_ns=stream.created_ns,
        ts_ns=time.time_ns(),
        consumer_count=svc.consumer_count(stream.cfg.name),
        cluster={"leader": svc.server.server_name},
        domain=svc.domain,
        paging=paging,
    )


async def create(svc: JetStreamService, req: ApiRequest) -> str:
    type_ = render.STREAM_CREATE_RESPONSE
    existing = svc.api.configs()
    try:
        cfg = parse_create(req.op[2], req.body, clustered=False, lookup=existing.get)
        if cfg.name in existing:
            check_recreate(cfg, existing[cfg.name])
            return render.stream_create_response(info_dict(svc, svc.api.stream(cfg.name)))
        check_overlap(cfg, existing.values())
    except JSApiError as err:
        raise error(type_, err) from None
    stream = await svc.api.create_stream(cfg)
    svc.advisories.stream_action("create", cfg.name, cfg)
    return render.stream_create_response(info_dict(svc, stream))


async def update(svc: JetStreamService, req: ApiRequest) -> str:
    type_ = render.STREAM_UPDATE_RESPONSE
    existing = svc.api.configs()
    try:
        new, _pedantic = parse_update(req.op[2], req.body, lookup=existing.get)
        old = existing.get(new.name)
        if old is None:
            raise JSApiError(STREAM_NOT_FOUND)
        cfg = check_update(old, new, clustered=False)
        check_overlap(cfg, existing.values())
    except JSApiError as err:
        raise error(type_, err) from None
    await svc.api.update_stream(cfg)
    stream = svc.api.stream(cfg.name)
    if cfg.subjects != old.subjects:
        svc.recapture(stream)
    svc.advisories.stream_action("modify", cfg.name, cfg)
    return render.stream_update_response(info_dict(svc, stream))


async def info(svc: JetStreamService, req: ApiRequest) -> str:
    stream = stream_of(svc, req.op[2], render.STREAM_INFO_RESPONSE)
    return render.stream_info_response(info_dict(svc, stream, paging=(0, 0, 0)))


async def delete(svc: JetStreamService, req: ApiRequest) -> str:
    if req.body.strip():
        raise error(DELETE_RESPONSE, JSApiError(NOT_EMPTY_REQUEST))
    stream = stream_of(svc, req.op[2], DELETE_RESPONSE)
    cfg = stream.cfg
    svc.release(cfg.name)
    await svc.api.delete_stream(cfg.name)
    svc.advisories.stream_action("delete", cfg.name, cfg)
    return dumps({"type": DELETE_RESPONSE, "success": True})


def _paging(body: bytes, type_: str) -> tuple[int, str]:
    req = json_object(body, type_)
    offset = req.get("offset", 0)
    subject = req.get("subject", "")
    if type(offset) is not int or not isinstance(subject, str):
        raise error(type_, JSApiError(INVALID_JSON))
    return max(offset, 0), subject


def _matching(svc: JetStreamService, subject: str) -> list[Stream]:
    streams = [svc.api.streams[n] for n in sorted(svc.api.streams)]
    if not subject:
        return streams
    s = subject.encode()
    return [x for x in streams if any(overlaps(s, y.encode()) for y in x.cfg.subjects)]


async def names(svc: JetStreamService, req: ApiRequest) -> str:
    offset, subject = _paging(req.body, NAMES_RESPONSE)
    streams = _matching(svc, subject)
    page = [s.cfg.name for s in streams[offset : offset + NAMES_PAGE]]
    return dumps(
        {
            "type": NAMES_RESPONSE,
            "total": len(streams),
            "offset": min(offset, len(streams)),
            "limit": NAMES_PAGE,
            "streams": page or None,
        }
    )


async def list_(svc: JetStreamService, req: ApiRequest) -> str:
    offset, subject = _paging(req.body, render.STREAM_LIST_RESPONSE)
    streams = _matching(svc, subject)
    infos = [info_dict(svc, s) for s in streams[offset : offset + LIST_PAGE]]
    return render.stream_list_response(
        infos, total=len(streams), offset=min(offset, len(streams)), limit=LIST_PAGE
    )


def _purge_error(err: JSApiError) -> ApiAnswer:
    return ApiAnswer(
        dumps({"type": PURGE_RESPONSE, "error": err.to_dict(), "success": False, "purged": 0})
    )


async def purge(svc: JetStreamService, req: ApiRequest) -> str:
    stream = stream_of(svc, req.op[2], PURGE_RESPONSE)
    try:
        body = json_object(req.body, PURGE_RESPONSE)
    except ApiAnswer:
        raise _purge_error(JSApiError(INVALID_JSON)) from None
    filt = body.get("filter") or None
    seq = body.get("seq") or None
    keep = body.get("keep") or None
    if seq is not None and keep is not None:
        raise _purge_error(JSApiError(BAD_REQUEST))
    result = await stream.purge(filt, seq, keep)
    if isinstance(result, PurgeResult):
        return dumps({"type": PURGE_RESPONSE, "success": True, "purged": result.purged})
    assert isinstance(result, ApiErrorResult)
    err = {"code": result.code, "err_code": result.err_code, "description": result.description}
    raise ApiAnswer(dumps({"type": PURGE_RESPONSE, "error": err, "success": False, "purged": 0}))
