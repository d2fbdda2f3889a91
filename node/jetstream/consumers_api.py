"""``$JS.API.CONSUMER.*`` handlers: CREATE (all forms), INFO, DELETE, NAMES, LIST, MSG.NEXT, PAUSE.

Creates are validated by ``node.jsapi.consumerconfig`` in nats-server's order
(subject forms, stream lookup, defaults, checks, existing consumer, action)
before anything changes; then the ``ConsumerManager`` (``delivery``) starts
or updates the consumer.  Create and info answers show the dynamic
``_nats.ver``/``_nats.level`` metadata, LIST the stored keys only; PAUSE
rewrites the stored ``_nats.req.level`` (``node.jsapi.versioning``).

Priority groups: the pull dispatcher serves them (``node.jetstream.pull``,
``node.jetstream.priority``); UNPIN releases a ``pinned_client`` consumer's pin.
"""

from __future__ import annotations

import json
import secrets
import string
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cluster.consumers import Consumer
from node.jetstream import apireq, cluster_advisories
from node.jetstream.common import ApiAnswer, ApiRequest, checked_off_loop, dumps, error
from node.jetstream.replicated_consumers import consumer_replicas
from node.jetstream.streams_api import stream_of
from node.jsapi import consumer_render as cr
from node.jsapi.consumer_render import ConsumerFigures
from node.jsapi.consumerconfig import decide_create, parse_create, valid_group_name
from node.jsapi.errors import (
    CONSUMER_INVALID_GROUP_NAME,
    CONSUMER_INVALID_PRIORITY_GROUP,
    CONSUMER_NOT_FOUND,
    INVALID_JSON,
    NOT_EMPTY_REQUEST,
    STREAM_NOT_FOUND,
    JSApiError,
)
from node.jsapi.godecode import INT, d_str
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
        num_redelivered=0 if c.cfg.max_deliver == 1 else fsm.num_redelivered,  # as nats-server
        num_waiting=pull.num_waiting() if pull is not None else 0,
        num_pending=_num_pending(c),
        push_bound=push.active if push is not None else None,
        pause_remaining_ns=paused,
        pinned_id=pull.pin_id if pull is not None else "",
        pinned_ns=pull.pinned_ns if pull is not None else 0,
    )


def _num_pending(c: Consumer) -> int:
    """ConsumerInfo ``num_pending``: counted by the leader only, from what it
    sent (committed or not); a follower of a replicated consumer reports 0, as
    nats-server's followers do (``streamNumPending`` only on the leader)."""
    if c.replicated and not c.leading:
        return 0
    return max(0, c.num_pending() - c.ahead.unapplied)


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
        cluster=cluster_block(svc, c),
    )


def cluster_block(svc: JetStreamService, c: Consumer) -> dict[str, Any] | None:
    """ConsumerInfo ``cluster`` of a consumer of a replicated stream (its
    leader is the stream's; an R1 stream's consumer: its host): the stream's block under the consumer's group
    name; an R1 consumer shows only the cluster's name and its leader, one
    with fewer replicas than its stream that many peers (the leader and the
    first others by name: its state rides in the stream's group on every
    stream peer all the same)."""
    if svc.meta is None:  # a standalone server's consumers have no cluster block
        return None
    if c.stream.replicated is None:  # an R1 stream's consumer: on its one host
        return svc.cluster_block(c.stream)
    block = svc.meta.replicated_block(c.stream)
    replicas = consumer_replicas(c.stream, c.cfg)
    if replicas <= 1:
        out = {"name": block["name"]}
        if "leader" in block:
            out["leader"] = block["leader"]
        return out
    block["raft_group"] = c.group_name
    if "leader" in block and isinstance(block.get("replicas"), list):
        block["replicas"] = block["replicas"][: replicas - 1]
    return block


def _consumer(svc: JetStreamService, stream: str, name: str, type_: str) -> Consumer:
    stream_of(svc, stream, type_)
    c = svc.consumers.of(stream).get(name)
    if c is None:
        raise error(type_, JSApiError(CONSUMER_NOT_FOUND))
    return c


async def create(svc: JetStreamService, req: ApiRequest) -> str | None:
    type_ = cr.CONSUMER_CREATE_RESPONSE
    try:
        clustered = svc.clustered
        creq = await checked_off_loop(
            req.body, lambda: parse_create(req.op, req.body, clustered=clustered)
        )
        stream = svc.api.streams.get(creq.stream)
        if stream is None:
            raise JSApiError(STREAM_NOT_FOUND)
        existing = {n: c.cfg for n, c in svc.consumers.of(stream.cfg.name).items()}
        # the sublist belongs to the event loop: ask it here, not in a thread
        has_interest = svc.router.sublist.has_interest
        bound = {
            c.deliver_subject: has_interest(c.deliver_subject.encode())
            for c in existing.values()
            if c.deliver_subject
        }
        stream_cfg = stream.cfg
        name, cfg, is_new = await checked_off_loop(
            req.body,
            lambda: decide_create(
                creq,
                stream_cfg,
                existing,
                new_name=_new_name,
                deliver_bound=lambda s: bound.get(s, False),
            ),
        )
        if is_new:
            svc.limits.check_consumer(len(existing))
    except JSApiError as err:
        raise error(type_, err) from None
    if is_new:
        if stream.replicated is not None:  # through the stream's log
            made = await svc.consumers.replicated.create(stream, name, cfg)
            if made is None:
                return None  # not committed: unanswered, as nats-server
            consumer = made
            cluster_advisories.consumer_leader_elected(svc, consumer)
        else:
            consumer = await svc.consumers.start(stream, name, cfg)
        svc.consumers.created(consumer)
    else:
        consumer = svc.consumers.of(stream.cfg.name)[name]
        if cfg != consumer.cfg:
            await svc.consumers.update(consumer, cfg)
    return cr.with_type(type_, info_dict(svc, consumer))


STEPDOWN_RESPONSE = "io.nats.jetstream.api.v1.consumer_leader_stepdown_response"


async def leader_stepdown(svc: JetStreamService, req: ApiRequest) -> str:
    """CONSUMER.LEADER.STEPDOWN: a replicated consumer's leader is its
    stream's, so the stream's lead moves (same placement body and errors as
    STREAM.LEADER.STEPDOWN); an R1 consumer or stream answers success and
    nothing changes, as nats-server."""
    from node.jetstream.streams_api import step_down, stepdown_request

    body = stepdown_request(req.body, STEPDOWN_RESPONSE)
    c = _consumer(svc, req.op[3], req.op[4], STEPDOWN_RESPONSE)
    if consumer_replicas(c.stream, c.cfg) <= 1 or c.stream.replicated is None:
        return dumps({"type": STEPDOWN_RESPONSE, "success": True})
    return step_down(svc, c.stream, body, STEPDOWN_RESPONSE)


async def info(svc: JetStreamService, req: ApiRequest) -> str:
    type_ = cr.CONSUMER_INFO_RESPONSE
    c = _consumer(svc, req.op[2], req.op[3], type_)
    await c.settled()  # what it counts as delivered has gone out
    return cr.with_type(type_, info_dict(svc, c))


async def delete(svc: JetStreamService, req: ApiRequest) -> str | None:
    type_ = cr.CONSUMER_DELETE_RESPONSE
    if req.body.strip():
        raise error(type_, JSApiError(NOT_EMPTY_REQUEST))
    _consumer(svc, req.op[2], req.op[3], type_)
    if await svc.consumers.delete(req.op[2], req.op[3]) is None:
        return None  # not committed: unanswered, as nats-server
    return dumps({"type": type_, "success": True})


_CONSUMERS_REQUEST = apireq.Request("JSApiConsumersRequest", {"offset": INT})
_PAUSE_REQUEST = apireq.Request("JSApiConsumerPauseRequest", {"pause_until": apireq._d_time_ns})
_ZERO_TIME = rfc3339_ns(0)


def _paged_error(type_: str, err: JSApiError) -> Exception:
    """NAMES/LIST errors carry the zero page (``total``…``consumers: []``)."""
    body = {"error": err.to_dict(), "total": 0, "offset": 0, "limit": 0, "consumers": []}
    return error_with(type_, body)


def _offset(body: bytes, type_: str) -> int:
    if not apireq.is_json_object_or_array(body):
        return 0
    try:
        doc = apireq.decode(body, _CONSUMERS_REQUEST)
    except JSApiError as err:
        raise _paged_error(type_, err) from None
    return max(int(doc.get("offset", 0)), 0)


async def names(svc: JetStreamService, req: ApiRequest) -> str:
    type_ = cr.CONSUMER_NAMES_RESPONSE
    offset = _offset(req.body, type_)
    if req.op[2] not in svc.api.streams:
        raise _paged_error(type_, JSApiError(STREAM_NOT_FOUND))
    all_names = sorted(svc.consumers.of(req.op[2]))
    offset = min(offset, len(all_names))
    page = all_names[offset : offset + NAMES_PAGE]
    return cr.names_response(page, total=len(all_names), offset=offset, limit=NAMES_PAGE)


async def list_(svc: JetStreamService, req: ApiRequest) -> str:
    type_ = cr.CONSUMER_LIST_RESPONSE
    offset = _offset(req.body, type_)
    if req.op[2] not in svc.api.streams:
        raise _paged_error(type_, JSApiError(STREAM_NOT_FOUND))
    consumers = svc.consumers.of(req.op[2])
    ordered = [consumers[n] for n in sorted(consumers)]
    offset = min(offset, len(ordered))
    page = ordered[offset : offset + LIST_PAGE]
    for c in page:
        await c.settled()
    infos = [info_dict(svc, c, versioned=False) for c in page]
    return cr.list_response(infos, total=len(ordered), offset=offset, limit=LIST_PAGE)


async def msg_next(svc: JetStreamService, req: ApiRequest) -> None:
    """``MSG.NEXT`` from the API queue (the service normally calls ``next_now``)."""
    next_now(svc, req)


def next_now(svc: JetStreamService, req: ApiRequest) -> None:
    """``MSG.NEXT``: hand the request to the consumer's waiting list (a
    ``Nats-Required-Api-Level`` above ours: ``412 Required Api Level``).

    Synchronous: the service calls it as the request arrives, so a pull
    never waits behind slow API requests (nats-server's consumers subscribe
    their own ``MSG.NEXT`` subjects)."""
    if demands_higher_level(req.headers) and req.op[4] in svc.consumers.of(req.op[3]):
        svc.client.publish(req.reply, b"", headers=REQUIRED_LEVEL_STATUS)
        return
    if not svc.consumers.next_request(req.op[3], req.op[4], req.reply, req.body):
        nr = b"NATS/1.0 503\r\nNats-Subject: " + req.subject + b"\r\n\r\n"
        svc.client.publish(req.reply, b"", headers=nr)


async def pause(svc: JetStreamService, req: ApiRequest) -> str:
    """PAUSE: ``pause_until`` in the future pauses, anything else resumes.

    Errors carry ``paused: false`` and the zero ``pause_until`` as
    nats-server's response struct does; the time is stored and answered in
    UTC.  The pause advisory is the consumer manager's (on change only).
    """
    type_ = cr.CONSUMER_PAUSE_RESPONSE
    zero = {"paused": False, "pause_until": _ZERO_TIME}
    try:
        doc: dict[str, Any] = {}
        if apireq.is_json_object_or_array(req.body):
            doc = apireq.decode(req.body, _PAUSE_REQUEST)
        stream_of(svc, req.op[2], type_)
        c = svc.consumers.of(req.op[2]).get(req.op[3])
        if c is None:
            raise JSApiError(CONSUMER_NOT_FOUND)
    except JSApiError as err:
        raise error_with(type_, {"error": err.to_dict(), **zero}) from None
    except ApiAnswer as answer:  # stream not found: add the zero fields
        body = json.loads(answer.text)
        body.pop("type", None)
        raise error_with(type_, {**body, **zero}) from None
    until_ns = doc.get("pause_until")
    if until_ns is None:
        norm = _ZERO_TIME
    elif until_ns == 0:  # the Unix epoch is a time like any other for Go
        norm = "1970-01-01T00:00:00Z"
    else:
        norm = rfc3339_ns(until_ns)
    stored = "" if norm == _ZERO_TIME else norm
    await svc.consumers.update(c, with_static_consumer(replace(c.cfg, pause_until=stored)))
    remaining = _pause_remaining(stored)
    body: dict[str, Any] = {"paused": remaining is not None, "pause_until": norm}
    if remaining is not None:
        body["pause_remaining"] = remaining
    return cr.with_type(type_, body)


CONSUMER_UNPIN_RESPONSE = "io.nats.jetstream.api.v1.consumer_unpin_response"
_UNPIN_REQUEST = apireq.Request("JSApiConsumerUnpinRequest", {"group": d_str})


def _unpin_group(body: bytes) -> str:
    """The ``group`` of an UNPIN body, read as Go's ``json.Unmarshal``.

    Raises:
        JSApiError: 10025 for a body Go cannot read or without a group,
            10162 for a group name nats-server refuses.
    """
    got = apireq.unmarshal(body, _UNPIN_REQUEST)
    group = got.get("group") or ""
    if not group:
        raise JSApiError(INVALID_JSON, err="consumer group not specified")
    if not valid_group_name(group):
        raise JSApiError(CONSUMER_INVALID_GROUP_NAME)
    return group


async def unpin(svc: JetStreamService, req: ApiRequest) -> str:
    """UNPIN ``{"group": …}``: release the pin of a consumer's group.

    nats-server's order: the body (10025, 10162), the stream (10059), the
    consumer (10014), the group among the consumer's (10160); then the pin
    is dropped and the UNPINNED advisory (reason ``admin``) goes out, pinned
    or not.
    """
    type_ = CONSUMER_UNPIN_RESPONSE
    try:
        group = _unpin_group(req.body)
        stream_of(svc, req.op[2], type_)
        c = svc.consumers.of(req.op[2]).get(req.op[3])
        if c is None:
            raise JSApiError(CONSUMER_NOT_FOUND)
        if group not in c.cfg.priority_groups:
            raise JSApiError(CONSUMER_INVALID_PRIORITY_GROUP)
    except JSApiError as err:
        raise error(type_, err) from None
    pull = svc.consumers.pulls.get((req.op[2], req.op[3]))
    if pull is not None:
        pull.unpin(group, "admin")
    else:
        svc.consumers.unpin_advisory(c, group, "admin")
    return dumps({"type": type_})


def error_with(type_: str, body: dict[str, Any]) -> Exception:
    """An error answer carrying extra zero-valued fields."""
    return ApiAnswer(dumps({"type": type_, **body}))
