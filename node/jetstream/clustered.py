"""Stream create, update and delete through the meta state machine.

Theory of operation: STREAM.CREATE, UPDATE and DELETE go through the meta
layer on every server — the ``_meta_`` Raft group in a cluster
(``node.jetstream.meta.MetaLayer``), a group of one on a standalone server
(``node.jetstream.solo_meta.SoloMeta``), ``svc.assignments`` either way.  In a
cluster only the meta leader handles them (``MetaLayer.answers``).  A request
is checked against the meta state's configs, in the same order and with the
same errors as nats-server, then proposed as a meta entry with the client's
reply subject; the server that hosts the stream answers creates and updates
once the change is real on it (``node.jetstream.meta_effects``), and the
proposer answers deletes.  A refusal decided in apply (placement, a racing
create with another config) is answered by the proposer.  A create the
cluster could not place is refused as the reference refuses it, 10005 with
the placement reason.  A proposal that cannot be committed (no quorum,
leadership lost) gets no answer, as nats-server leaves it: the client times
out and retries.

LIST needs the state of streams hosted elsewhere: the meta leader asks each
host on ``$JSC.SI.<stream>`` (answered by the host from its store) and
reports the streams that did not answer in time under ``missing``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import trio

from cluster.meta import (
    MetaError,
    add_stream_entry,
    delete_stream_entry,
    origin_doc,
    update_stream_entry,
)
from cluster.model import Storage, StreamConfig
from cluster.naming import fresh_group_name
from node.jetstream import scaling
from node.jetstream.common import TYPE, ApiAnswer, ApiRequest, checked_off_loop, dumps, error
from node.jsapi import render
from node.jsapi.errors import STREAM_NOT_FOUND, JSApiError
from node.jsapi.streamconfig import (
    check_overlap,
    check_recreate,
    check_update,
    parse_create,
    parse_update,
)
from raft.errors import RaftError

if TYPE_CHECKING:
    from cluster.streams import Stream
    from node.jetstream.service import JetStreamService
    from node.session import Subscription

log = logging.getLogger(__name__)

DELETE_RESPONSE = TYPE + "stream_delete_response"
#: how long LIST waits for the hosts' stream infos
INFO_GATHER_S = 2.0
INFO_SUBJECT = "$JSC.SI."


def _refusal(type_: str, err: MetaError) -> ApiAnswer:
    body = {"code": err.code, "err_code": err.err_code, "description": err.description}
    return ApiAnswer(dumps({"type": type_, "error": body}))


def _origin(svc: JetStreamService, req: ApiRequest) -> dict[str, Any]:
    """The request, for the audit advisory of the host's answer."""
    from node.jetstream.advisories import client_info

    client = None if req.client is None else client_info(svc.server, req.client)
    return origin_doc("$JS.API." + ".".join(req.op), req.body, client)


async def _propose(svc: JetStreamService, entry: bytes) -> object | None:
    """The meta result, or None when the proposal could not be committed
    (then nobody answers: nats-server leaves such requests unanswered)."""
    try:
        return await svc.assignments.propose(entry)
    except RaftError as e:
        log.warning("event=meta_proposal_failed reason=%r", e)
        return None


async def create(svc: JetStreamService, req: ApiRequest) -> str | None:
    """STREAM.CREATE (in a cluster, on the meta leader)."""
    meta = svc.assignments
    type_ = render.STREAM_CREATE_RESPONSE
    existing = meta.configs()
    clustered = svc.clustered
    try:
        cfg = await checked_off_loop(
            req.body,
            lambda: parse_create(req.op[2], req.body, clustered=clustered, lookup=existing.get),
        )
        sa = meta.assignment(cfg.name)
        if sa is not None:
            check_recreate(cfg, existing[cfg.name])
            config: dict[str, Any] = dict(sa.config)  # identical: its host answers again
        else:
            svc.limits.check_create(cfg, existing.values(), replicated=clustered)
            if not clustered:  # a cluster's reservations are per server (not checked yet)
                svc.resources.check_create(cfg, existing.values())
            await checked_off_loop(req.body, lambda: check_overlap(cfg, existing.values()))
            config = cfg.to_dict()
    except JSApiError as err:
        raise error(type_, err) from None
    entry = add_stream_entry(
        config,
        group=fresh_group_name(
            "S", cfg.num_replicas, cfg.storage is Storage.FILE, meta.rng, meta.machine.groups()
        ),
        created_ns=time.time_ns(),
        seed=meta.rng.getrandbits(63),
        online=await meta.online_for(cfg.num_replicas),
        unique_tag=meta.unique_tag,
        reply=req.reply.decode(),
        origin=_origin(svc, req),
        account=svc.account.name,
    )
    result = await _propose(svc, entry)
    if isinstance(result, MetaError):
        raise _refusal(type_, result)
    return None  # the host answers


async def update(svc: JetStreamService, req: ApiRequest) -> str | None:
    """STREAM.UPDATE (in a cluster, on the meta leader)."""
    meta = svc.assignments
    type_ = render.STREAM_UPDATE_RESPONSE
    existing = meta.configs()
    try:
        new, _pedantic = await checked_off_loop(
            req.body, lambda: parse_update(req.op[2], req.body, lookup=existing.get)
        )
        old = existing.get(new.name)
        if old is None:
            raise JSApiError(STREAM_NOT_FOUND)
        cfg = check_update(old, new, clustered=svc.clustered)
        svc.limits.check_update(old, cfg, existing.values(), replicated=svc.clustered)
        if not svc.clustered:
            svc.resources.check_update(old, cfg, existing.values())
        await checked_off_loop(req.body, lambda: check_overlap(cfg, existing.values()))
    except JSApiError as err:
        raise error(type_, err) from None
    scale = None
    sa = meta.assignment(cfg.name)
    if svc.meta is not None and sa is not None and cfg.num_replicas != old.num_replicas:
        scale = await scaling.scale_request(svc, sa, cfg)  # placed in meta apply
        log.info("event=stream_scale_proposed stream=%s replicas=%d", cfg.name, cfg.num_replicas)
    entry = update_stream_entry(
        cfg.to_dict(),
        reply=req.reply.decode(),
        origin=_origin(svc, req),
        scale=scale,
        account=svc.account.name,
    )
    result = await _propose(svc, entry)
    if isinstance(result, MetaError):
        raise _refusal(type_, result)
    return None  # the host answers


async def delete(svc: JetStreamService, req: ApiRequest) -> str | None:
    """STREAM.DELETE (in a cluster, the meta leader answers once applied)."""
    meta = svc.assignments
    if meta.assignment(req.op[2]) is None:
        raise error(DELETE_RESPONSE, JSApiError(STREAM_NOT_FOUND))
    entry = delete_stream_entry(req.op[2], reply="", account=svc.account.name)
    result = await _propose(svc, entry)
    if result is None:
        return None
    if isinstance(result, MetaError):
        raise _refusal(DELETE_RESPONSE, result)
    return dumps({"type": DELETE_RESPONSE, "success": True})


# -- stream infos across the cluster ---------------------------------------------


def info_responder(svc: JetStreamService, stream: Stream) -> Subscription:
    """The host's answer to ``$JSC.SI.<stream>``: its StreamInfo for LIST."""
    from node.jetstream.streams_api import info_dict

    name = stream.cfg.name

    def on_msg(sub: Any, subject: bytes, reply: bytes | None, hdr: Any, body: bytes) -> None:
        if reply and name in svc.api.streams:
            svc.client.publish(reply, dumps(info_dict(svc, stream, versioned=False)).encode())

    return svc.client.subscribe((INFO_SUBJECT + name).encode(), on_msg)


async def gather_infos(
    svc: JetStreamService, names: list[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """StreamInfos of ``names`` (in order) and the names whose host did not answer."""
    import json

    from node.jetstream.streams_api import info_dict

    got: dict[str, dict[str, Any]] = {}
    remote = []
    for n in names:
        local = svc.api.streams.get(n)
        if local is not None:
            got[n] = info_dict(svc, local, versioned=False)
        else:
            remote.append(n)
    if remote:
        inbox = f"_INBOX.jsc.{svc.assignments.rng.getrandbits(64):016x}"
        done = trio.Event()

        def on_reply(sub: Any, subject: bytes, reply: Any, hdr: Any, body: bytes) -> None:
            key = subject.decode().rsplit(".", 1)[-1]
            try:
                idx = int(key)
            except ValueError:
                return
            if 0 <= idx < len(remote):
                try:
                    got[remote[idx]] = json.loads(body)
                except ValueError:
                    return
                if all(r in got for r in remote):
                    done.set()

        sub = svc.client.subscribe((inbox + ".*").encode(), on_reply)
        try:
            for i, n in enumerate(remote):
                svc.client.publish((INFO_SUBJECT + n).encode(), b"", reply=f"{inbox}.{i}".encode())
            with trio.move_on_after(INFO_GATHER_S):
                await done.wait()
        finally:
            svc.client.unsubscribe(sub)
    infos = [got[n] for n in names if n in got]
    missing = [n for n in names if n not in got]
    return infos, missing


def configs_of(assignments: Any) -> dict[str, StreamConfig]:
    """Parsed configs of meta assignments, by name."""
    return {name: StreamConfig.from_dict(sa.config) for name, sa in assignments.items()}


# -- account usage across the cluster ----------------------------------------------

USAGE_SUBJECT = b"$JSC.USAGE"
#: how long account info waits for the other servers' usage
USAGE_GATHER_S = 0.5
_USAGE_KEYS = (
    "memory",
    "storage",
    "reserved_memory",
    "reserved_storage",
    "consumers",
    "api_total",
    "api_errors",
)


def local_usage(svc: JetStreamService) -> dict[str, int]:
    """This server's share of the account's usage (its hosted streams)."""
    view = svc.stats()
    streams = [sv for acc in view.accounts for sv in acc.streams]
    return {
        "memory": view.memory,
        "storage": view.storage,
        "reserved_memory": view.reserved_memory,
        "reserved_storage": view.reserved_storage,
        # a replicated stream's consumers are counted once, by its leader
        "consumers": sum(
            svc.consumer_count(sv.name)
            for sv in streams
            if (s := svc.api.streams.get(sv.name)) is None or s.is_leader
        ),
        "api_total": view.api_total,
        "api_errors": view.api_errors,
    }


def usage_responder(svc: JetStreamService) -> Subscription:
    """Answer ``$JSC.USAGE`` (the meta leader's account info) with local usage."""

    def on_msg(sub: Any, subject: bytes, reply: bytes | None, hdr: Any, body: bytes) -> None:
        if reply:
            doc = {"server": svc.server.server_name, **local_usage(svc)}
            svc.client.publish(reply, dumps(doc).encode())

    return svc.client.subscribe(USAGE_SUBJECT, on_msg)


async def cluster_usage(svc: JetStreamService) -> dict[str, int]:
    """The account's usage summed over the servers that answer in time."""
    import json

    meta = svc.meta
    assert meta is not None
    total = local_usage(svc)
    others = {n for n in meta.online() if n != svc.server.server_name}
    if not others:
        return total
    inbox = f"_INBOX.jsu.{meta.rng.getrandbits(64):016x}".encode()
    seen: set[str] = set()
    done = trio.Event()

    def on_reply(sub: Any, subject: bytes, reply: Any, hdr: Any, body: bytes) -> None:
        try:
            doc = json.loads(body)
        except ValueError:
            return
        name = doc.get("server") if isinstance(doc, dict) else None
        if name not in others or name in seen:
            return
        seen.add(name)
        for k in _USAGE_KEYS:
            v = doc.get(k)
            if isinstance(v, int):
                total[k] += v
        if seen >= others:
            done.set()

    sub = svc.client.subscribe(inbox, on_reply)
    try:
        svc.client.publish(USAGE_SUBJECT, b"", reply=inbox)
        with trio.move_on_after(USAGE_GATHER_S):
            await done.wait()
    finally:
        svc.client.unsubscribe(sub)
    return total
