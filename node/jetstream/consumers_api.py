"""``$JS.API.CONSUMER.*`` handlers: CREATE (all forms), INFO, DELETE, NAMES, LIST, MSG.NEXT, PAUSE.

Creates are validated by ``node.jsapi.consumerconfig`` in nats-server's order
(subject forms, stream lookup, defaults, checks, existing consumer, action)
before anything changes; then the ``ConsumerManager`` (``delivery``) starts
or updates the consumer.  Create and info answers show the dynamic
``_nats.ver``/``_nats.level`` metadata, LIST the stored keys only; PAUSE
rewrites the stored ``_nats.req.level`` (``node.jsapi.versioning``).

Priority groups (``priority_policy`` other than ``none``) are not served by
trijet's pull delivery (no ``group``/``Nats-Pin-Id``/``min_pending``
handling), so a valid config using them is refused with 412/10185
``JetStream minimum api level required`` — the answer nats-server gives a
request needing an API level it cannot serve — instead of creating a
consumer that would silently ignore them.
"""

from __future__ import annotations

import secrets
import string
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cluster.consumer_model import PriorityPolicy
from cluster.consumers import Consumer
from node.jetstream.common import ApiRequest, dumps, error, json_object
from node.jetstream.streams_api import stream_of
from node.jsapi import consumer_render as cr
from node.jsapi.consumer_render import ConsumerFigures
from node.jsapi.consumerconfig import decide_create, parse_create
from node.jsapi.errors import (
    BAD_REQUEST,
    CONSUMER_NOT_FOUND,
    INVALID_JSON,
    NOT_EMPTY_REQUEST,
    REQUIRED_API_LEVEL,
    STREAM_NOT_FOUND,
    JSApiError,
)
from node.jsapi.render import rfc3339_ns
from node.jsapi.versioning import REQUIRED_LEVEL_STATUS, demands_higher_level, with_static_consumer
from node.version import NATS_VERSION

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

NAMES_PAGE = 1024
LIST_PAGE = 256
_NAME_ALPHABET = string.ascii_letters + string.digits


def _new_name() -> str:
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(8))


def figures(svc: JetStreamService, c: Consumer) -> ConsumerFigures:
    """The live numbers of consumer ``c``."""
    fsm = c.fsm
    key = (c.stream.cfg.name, c.name)
    pull = svc.consumers.pulls.get(key)
    push = svc.consumers.pushes.get(key)
    paused = _pause_remaining(c.cfg.pause_until)
    return ConsumerFigures(
        delivered_dseq=fsm.dseq,
        delivered_sseq=fsm.delivered_sseq,
        floor_dseq=fsm.floor_dseq,
        floor_sseq=fsm.floor_sseq,
        last_delivered_ns=fsm.last_delivered_ns,
        last_ack_ns=fsm.last_ack_ns,
        num_ack_pending=fsm.num_ack_pending,
        num_redelivered=fsm.num_redelivered,
        num_waiting=len(pull.waiting) if pull is not None else 0,
        num_pending=c.num_pending(),
        push_bound=push.active if push is not None else None,
        pause_remaining_ns=paused,
    )


def _pause_remaining(pause_until: str) -> int | None:
    if not pause_until:
        return None
    from cluster.consumer_fsm import rfc3339_to_ns

    left = rfc3339_to_ns(pause_until) - time.time_ns()
    return left if left > 0 else None


def info_dict(svc: JetStreamService, c: Consumer, *, versioned: bool = True) -> dict[str, Any]:
    """ConsumerInfo of ``c``; ``versioned`` shows ``_nats.ver``/``_nats.level``
    (create and info answers, not LIST)."""
    return cr.consumer_info_dict(
        c.stream.cfg.name,
        c.name,
        c.cfg,
        created_ns=c.created_ns,
        figures=figures(svc, c),
        ts_ns=time.time_ns(),
        version=NATS_VERSION if versioned else "",
    )


def _consumer(svc: JetStreamService, stream: str, name: str, type_: str) -> Consumer:
    stream_of(svc, stream, type_)
    c = svc.consumers.of(stream).get(name)
    if c is None:
        raise error(type_, JSApiError(CONSUMER_NOT_FOUND))
    return c


async def create(svc: JetStreamService, req: ApiRequest) -> str:
    type_ = cr.CONSUMER_CREATE_RESPONSE
    try:
        creq = parse_create(req.op, req.body)
        stream = svc.api.streams.get(creq.stream)
        if stream is None:
            raise JSApiError(STREAM_NOT_FOUND)
        existing = {n: c.cfg for n, c in svc.consumers.of(stream.cfg.name).items()}
        name, cfg, is_new = decide_create(
            creq,
            stream.cfg,
            existing,
            new_name=_new_name,
            deliver_bound=lambda s: bool(s) and svc.server.router.sublist.has_interest(s.encode()),
        )
        if cfg.priority_policy is not PriorityPolicy.NONE:
            raise JSApiError(REQUIRED_API_LEVEL)  # priority groups: not served here
    except JSApiError as err:
        raise error(type_, err) from None
    if is_new:
        consumer = await svc.consumers.start(stream, name, cfg)
        svc.consumers.created(consumer)
    else:
        consumer = svc.consumers.of(stream.cfg.name)[name]
        if cfg != consumer.cfg:
            await svc.consumers.update(consumer, cfg)
    return cr.with_type(type_, info_dict(svc, consumer))


async def info(svc: JetStreamService, req: ApiRequest) -> str:
    type_ = cr.CONSUMER_INFO_RESPONSE
    c = _consumer(svc, req.op[2], req.op[3], type_)
    await c.settled()  # what it counts as delivered has gone out
    return cr.with_type(type_, info_dict(svc, c))


async def delete(svc: JetStreamService, req: ApiRequest) -> str:
    type_ = cr.CONSUMER_DELETE_RESPONSE
    if req.body.strip():
        raise error(type_, JSApiError(NOT_EMPTY_REQUEST))
    _consumer(svc, req.op[2], req.op[3], type_)
    await svc.consumers.delete(req.op[2], req.op[3])
    return dumps({"type": type_, "success": True})


def _offset(body: bytes, type_: str) -> int:
    doc = json_object(body, type_)
    offset = doc.get("offset", 0)
    if type(offset) is not int:
        raise error(type_, JSApiError(INVALID_JSON))
    return max(offset, 0)


async def names(svc: JetStreamService, req: ApiRequest) -> str:
    type_ = cr.CONSUMER_NAMES_RESPONSE
    offset = _offset(req.body, type_)
    if req.op[2] not in svc.api.streams:
        body = {"error": JSApiError(STREAM_NOT_FOUND).to_dict(), "total": 0, "offset": 0}
        raise error_with(type_, {**body, "limit": 0, "consumers": []})
    all_names = sorted(svc.consumers.of(req.op[2]))
    offset = min(offset, len(all_names))
    page = all_names[offset : offset + NAMES_PAGE]
    return cr.names_response(page, total=len(all_names), offset=offset, limit=NAMES_PAGE)


async def list_(svc: JetStreamService, req: ApiRequest) -> str:
    type_ = cr.CONSUMER_LIST_RESPONSE
    offset = _offset(req.body, type_)
    stream_of(svc, req.op[2], type_)
    consumers = svc.consumers.of(req.op[2])
    ordered = [consumers[n] for n in sorted(consumers)]
    offset = min(offset, len(ordered))
    page = ordered[offset : offset + LIST_PAGE]
    for c in page:
        await c.settled()
    infos = [info_dict(svc, c, versioned=False) for c in page]
    return cr.list_response(infos, total=len(ordered), offset=offset, limit=LIST_PAGE)


async def msg_next(svc: JetStreamService, req: ApiRequest) -> None:
    """``MSG.NEXT``: hand the request to the consumer's waiting list (a
    ``Nats-Required-Api-Level`` above ours: ``412 Required Api Level``)."""
    if demands_higher_level(req.headers) and req.op[4] in svc.consumers.of(req.op[3]):
        svc.client.publish(req.reply, b"", headers=REQUIRED_LEVEL_STATUS)
        return None
    if not svc.consumers.next_request(req.op[3], req.op[4], req.reply, req.body):
        nr = b"NATS/1.0 503\r\nNats-Subject: " + req.subject + b"\r\n\r\n"
        svc.client.publish(req.reply, b"", headers=nr)
    return None


async def pause(svc: JetStreamService, req: ApiRequest) -> str:
    type_ = cr.CONSUMER_PAUSE_RESPONSE
    c = _consumer(svc, req.op[2], req.op[3], type_)
    doc = json_object(req.body, type_)
    until = doc.get("pause_until", "")
    if not isinstance(until, str):
        raise error(type_, JSApiError(BAD_REQUEST))
    from node.jsapi.consumerconfig import _rfc3339_normalise

    norm = _rfc3339_normalise(until) if until else ""
    if norm is None:
        raise error(type_, JSApiError(BAD_REQUEST))
    await svc.consumers.update(c, with_static_consumer(replace(c.cfg, pause_until=norm)))
    remaining = _pause_remaining(norm)
    body: dict[str, Any] = {"paused": remaining is not None}
    body["pause_until"] = rfc3339_ns(0) if not norm else norm
    if remaining is not None:
        body["pause_remaining"] = remaining
    return cr.with_type(type_, body)


def error_with(type_: str, body: dict[str, Any]) -> Exception:
    """An error answer carrying extra zero-valued fields."""
    from node.jetstream.common import ApiAnswer

    return ApiAnswer(dumps({"type": type_, **body}))
