"""The meta side of ``$JS.API.SERVER.REMOVE``: moving the removed server's assets.

Theory of operation
-------------------
The system account's ``MetaOps`` (``node/jetstream/noaccount.py``) answers
``META.LEADER.STEPDOWN`` and ``SERVER.REMOVE`` for system users on the meta
leader (nats-server answers nobody else).  Before the server leaves the
``_meta_`` group, ``remap_server`` commits ``REMOVE_SERVER``: decided in meta
``apply`` from replicated state only, it takes the server out of placement and
rewrites every replicated stream's assignment that named it (a replacement where
one fits; R1 streams keep theirs); the servers then reconcile each stream's
Raft membership as for ``STREAM.PEER.REMOVE``.

The ``meta`` argument is the narrow seam: anything with the ``MetaLayer``
attributes used here (``online``, ``unique_tag``, ``rng``, ``propose``).
"""

from __future__ import annotations

import logging
from typing import Any

from cluster.meta import MetaError, remove_server_entry
from node.jetstream import apireq
from node.jetstream.common import TYPE, dumps
from node.jsapi import render
from node.jsapi.errors import (
    JSApiError,
)
from node.jsapi.godecode import d_str

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


async def remap_server(meta: Any, name: str) -> str | None:
    """The meta side of SERVER.REMOVE on the meta leader: ``REMOVE_SERVER``
    decided in meta ``apply`` (the server leaves placement, replicated streams
    get a replacement where one fits, the servers then reconcile each stream's
    Raft membership as for PEER.REMOVE).

    Returns:
        None once committed, else the refusal to answer (reference texts).

    Raises:
        RaftError: not committed (the caller does not answer, as nats-server
            when its meta leader is lost).
    """
    entry = remove_server_entry(
        name, seed=meta.rng.getrandbits(63), online=meta.online(), unique_tag=meta.unique_tag
    )
    result = await meta.propose(entry)
    if isinstance(result, MetaError):
        return _refusal(SERVER_REMOVE_RESPONSE, result)
    return None
