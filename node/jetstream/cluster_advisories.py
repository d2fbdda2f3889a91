"""Advisories of replicated assets: leader elected and quorum lost, as nats-server sends them.

Theory of operation
-------------------
A replicated stream's consumers live in the stream's Raft group, so a
consumer's leader is its stream's leader: whenever a server gains a stream's
lead it announces ``STREAM.LEADER_ELECTED`` and, for each consumer of more
than one replica, ``CONSUMER.LEADER_ELECTED`` (the reference announces a
consumer's election just before its ``CONSUMER.CREATED``; an R1 asset gets
none).  ``replicas`` lists every member with the leader first, in the
reference's PeerInfo shape; a consumer lists as many members as its
``num_replicas`` (its state is on every member of the stream's group, but its
declared size is what the reference reports).

A leader that steps down because it no longer hears from a majority (the
Raft group's leader fallback) announces ``STREAM.QUORUM_LOST`` and
``CONSUMER.QUORUM_LOST`` for its consumers of more than one replica, with
every member listed by name, itself ``current:true`` and the others
``current:false``, all ``active:0`` — the reference sends these only when the
stepping-down leader lacks quorum and its group is older than 5 s; a
graceful stepdown (the followers were heard moments ago) sends nothing.
Only the server concerned publishes, so each advisory goes out once
cluster-wide.

A server that becomes the meta leader announces
``$JS.EVENT.ADVISORY.DOMAIN.LEADER_ELECTED`` in the system account, as the
reference does: ``leader`` is its peer id, ``replicas`` every member of
``_meta_`` (itself included), then the cluster's name and the domain.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cluster.naming import peer_id
from node.jetstream.common import dumps
from node.jetstream.replicated_consumers import consumer_replicas

if TYPE_CHECKING:
    from cluster.consumers import Consumer
    from cluster.streams import Stream
    from node.jetstream.service import JetStreamService

STREAM_QUORUM_LOST_SUBJECT = "$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST."
CONSUMER_LEADER_ELECTED_SUBJECT = "$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED."
CONSUMER_QUORUM_LOST_SUBJECT = "$JS.EVENT.ADVISORY.CONSUMER.QUORUM_LOST."
DOMAIN_LEADER_ELECTED_SUBJECT = b"$JS.EVENT.ADVISORY.DOMAIN.LEADER_ELECTED"
DOMAIN_LEADER_ELECTED_TYPE = "io.nats.jetstream.advisory.v1.domain_leader_elected"
#: a group younger than this sends no quorum-lost advisory (as the reference)
QUORUM_LOST_GROUP_AGE_S = 5.0


def leader_replicas(svc: JetStreamService, stream: Stream) -> list[dict[str, Any]]:
    """Every member of ``stream``'s group as PeerInfo, this server (the leader) first."""
    assert svc.meta is not None
    me = svc.server.server_name
    block = svc.meta.replicated_block(stream)
    head = {"name": me, "current": True, "active": 0, "peer": peer_id(me)}
    return [head, *block["replicas"]]


def consumer_leader_elected(svc: JetStreamService, c: Consumer) -> None:
    """``CONSUMER.LEADER_ELECTED.<stream>.<consumer>`` from its (stream's) leader."""
    stream = c.stream
    n = consumer_replicas(stream, c.cfg)
    if svc.meta is None or stream.replicated is None or n < 2:
        return
    body = {
        "stream": stream.cfg.name,
        "consumer": c.name,
        "leader": svc.server.server_name,
        "replicas": leader_replicas(svc, stream)[:n],
    }
    subject = f"{CONSUMER_LEADER_ELECTED_SUBJECT}{stream.cfg.name}.{c.name}"
    svc.consumers._publish_advisory(subject, "consumer_leader_elected", body)


def lost_quorum(stream: Stream) -> bool:
    """Whether this replica (just stepped down) hears from fewer than a
    majority of its group, its group being older than the reference's 5 s."""
    rg = stream.replicated
    if rg is None or time.time_ns() - stream.created_ns < QUORUM_LOST_GROUP_AGE_S * 1e9:
        return False
    members = rg.members
    window = rg.raft.config.election_timeout_s_min
    seen = rg.status().get("peers") or {}
    heard = 1 + sum(
        1
        for m in members
        if m != rg.node_id
        and isinstance(ago := (seen.get(m) or {}).get("last_seen_s_ago"), int | float)
        and ago < window
    )
    return heard < len(members) // 2 + 1


def quorum_lost(svc: JetStreamService, stream: Stream) -> None:
    """``STREAM.QUORUM_LOST`` and ``CONSUMER.QUORUM_LOST`` from a leader that
    stepped down without a majority."""
    rg = stream.replicated
    if rg is None:
        return
    me = svc.server.server_name
    replicas = [
        {"name": m, "current": m == me, "active": 0, "peer": peer_id(m)} for m in rg.members
    ]
    name = stream.cfg.name
    svc.consumers._publish_advisory(
        STREAM_QUORUM_LOST_SUBJECT + name,
        "stream_quorum_lost",
        {"stream": name, "replicas": replicas},
    )
    for c in list(svc.consumers.of(name).values()):
        n = consumer_replicas(stream, c.cfg)
        if n < 2:
            continue
        mine = [r for r in replicas if r["name"] == me]
        others = [r for r in replicas if r["name"] != me][: n - 1]
        svc.consumers._publish_advisory(
            f"{CONSUMER_QUORUM_LOST_SUBJECT}{name}.{c.name}",
            "consumer_quorum_lost",
            {"stream": name, "consumer": c.name, "replicas": mine + others},
        )


def domain_leader_elected(svc: JetStreamService, publish: Callable[[bytes, bytes], None]) -> None:
    """``DOMAIN.LEADER_ELECTED`` from the new meta leader (this server), through
    ``publish(subject, payload)`` in the system account."""
    meta = svc.meta
    assert meta is not None
    info = meta.cluster_info()
    me = svc.server.server_name
    head = {"name": me, "current": True, "active": 0, "peer": peer_id(me)}
    body = svc.advisories._head(DOMAIN_LEADER_ELECTED_TYPE)
    body["leader"] = peer_id(me)
    body["replicas"] = [head, *info["replicas"]]
    body["cluster"] = meta.cluster_name
    if svc.domain:
        body["domain"] = svc.domain
    publish(DOMAIN_LEADER_ELECTED_SUBJECT, dumps(body).encode())
