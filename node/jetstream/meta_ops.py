"""Operator actions on the meta layer: META.LEADER.STEPDOWN and SERVER.REMOVE.

Theory of operation
-------------------
nats-server answers ``$JS.API.META.LEADER.STEPDOWN`` and ``$JS.API.SERVER.REMOVE``
only for users of the system account (reference §4.2, §5.3); from any other
account they get no reply at all.  The authorisation belongs to the accounts
work (#15): these functions are the meta-side operations an *authorised*
request calls, on the meta leader, and return the reply text (None: no reply,
as on a server that is not the meta leader).  They are not routed from
``$JS.API`` until a system account exists, so trijet keeps the reference's
silence towards ordinary users meanwhile.

* ``meta_leader_stepdown``: body empty or ``{"placement":{preferred|cluster|tags}}``;
  the same choice and 10005 texts as a stream stepdown
  (``cluster.placement.stepdown_target``); answered at once, before the new
  election ends.
* ``server_remove``: body ``{"peer":"<name>"}`` or ``{"peer_id":"<id>"}``; 10003
  for an empty body or neither field, 10025 for bad JSON, 10044 for a server the
  meta state does not know.  The change is decided in meta ``apply``
  (``REMOVE_SERVER``: replacements placed, assignments rewritten; the servers
  then reconcile each stream's Raft membership as for PEER.REMOVE), then the
  server leaves the ``_meta_`` group (the meta leader itself cannot be removed
  while it leads; it keeps its seat and the request still succeeds for the
  assets).

The ``meta`` argument is the narrow seam: anything with the ``MetaLayer``
attributes used here (``name``, ``is_leader``, ``machine``, ``specs``,
``online``, ``unique_tag``, ``rng``, ``propose``, ``group``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from cluster.meta import MetaError, remove_server_entry
from cluster.naming import peer_id
from cluster.placement import NoPlacement, stepdown_target
from node.jetstream import apireq
from node.jetstream.common import TYPE, dumps
from node.jsapi import render
from node.jsapi.errors import (
    BAD_REQUEST,
    CLUSTER_NO_PEERS,
    CLUSTER_SERVER_NOT_MEMBER,
    INVALID_JSON,
    JSApiError,
)
from node.jsapi.godecode import d_str
from raft.errors import RaftError

log = logging.getLogger(__name__)

STEPDOWN_RESPONSE = TYPE + "meta_leader_stepdown_response"
SERVER_REMOVE_RESPONSE = TYPE + "meta_server_remove_response"
SERVER_REMOVE = apireq.Request("JSApiMetaServerRemoveRequest", {"peer": d_str, "peer_id": d_str})
#: bound on the meta group's membership change after SERVER.REMOVE
MEMBERSHIP_S_MAX = 5.0


def _error(type_: str, err: JSApiError) -> str:
    return render.error_response(type_, err)


def _refusal(type_: str, err: MetaError) -> str:
    body = {"code": err.code, "err_code": err.err_code, "description": err.description}
    return dumps({"type": type_, "error": body})


async def meta_leader_stepdown(meta: Any, body: bytes) -> str | None:
    """META.LEADER.STEPDOWN on the meta leader (None elsewhere: no reply)."""
    type_ = STEPDOWN_RESPONSE
    if meta is None or not meta.is_leader or meta.group is None:
        return None
    req: dict[str, Any] = {}
    if body.strip():
        try:
            req = json.loads(body)
        except ValueError as exc:
            return _error(type_, JSApiError(INVALID_JSON, err=str(exc)))
        if not isinstance(req, dict):
            return _error(type_, JSApiError(INVALID_JSON, err="not an object"))
    placement = req.get("placement") if isinstance(req.get("placement"), dict) else {}
    tags = placement.get("tags") if isinstance(placement.get("tags"), list) else []
    members = sorted(set(meta.group.members) | {meta.name})
    target = stepdown_target(
        meta.name,
        meta.specs(members),
        preferred=placement.get("preferred") or None,
        cluster=placement.get("cluster") or None,
        tags=tuple(str(t) for t in tags),
        rng=meta.rng,
    )
    if isinstance(target, NoPlacement):
        return _error(type_, JSApiError(CLUSTER_NO_PEERS, err=target.description))
    meta.step_down_soon(target)
    return dumps({"type": type_, "success": True})


def _server_name(meta: Any, req: dict[str, Any]) -> str | None:
    """The server a SERVER.REMOVE body names (by name or peer id), if known."""
    known = meta.machine.peers
    name = req.get("peer") or ""
    if name:
        return str(name) if name in known else None
    pid = req.get("peer_id") or ""
    return next((n for n in sorted(known) if peer_id(n) == pid), None)


async def server_remove(meta: Any, body: bytes) -> str | None:
    """SERVER.REMOVE on the meta leader (None elsewhere, or when the change could
    not be committed: no reply, as nats-server)."""
    type_ = SERVER_REMOVE_RESPONSE
    if meta is None or not meta.is_leader:
        return None
    if apireq.is_empty_request(body):
        return _error(type_, JSApiError(BAD_REQUEST))
    try:
        req = apireq.decode(body, SERVER_REMOVE)
    except JSApiError as err:
        return _error(type_, err)
    if not req.get("peer") and not req.get("peer_id"):
        return _error(type_, JSApiError(BAD_REQUEST))
    name = _server_name(meta, req)
    if name is None:
        return _error(type_, JSApiError(CLUSTER_SERVER_NOT_MEMBER))
    entry = remove_server_entry(
        name, seed=meta.rng.getrandbits(63), online=meta.online(), unique_tag=meta.unique_tag
    )
    try:
        result = await meta.propose(entry)
    except RaftError as exc:
        log.warning("event=server_remove_not_committed server=%s reason=%r", name, exc)
        return None
    if isinstance(result, MetaError):
        return _refusal(type_, result)
    if name == meta.name:
        log.warning("event=server_remove_of_meta_leader server=%s seat=kept", name)
    else:
        try:
            await meta.group.remove_member(name, timeout_s=MEMBERSHIP_S_MAX)
        except RaftError as exc:  # the assets moved; the seat is retried by nobody: say so
            log.warning("event=meta_member_remove_failed server=%s reason=%r", name, exc)
    return dumps({"type": type_, "success": True})
