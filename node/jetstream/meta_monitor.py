"""What the meta layer shows: StreamInfo's ``cluster`` block, ``/jsz`` ``meta_cluster``
and the ``/raftz`` entries of the meta group and of replicated streams, in nats-server's
shapes.  Functions of a ``MetaLayer`` (``node.jetstream.meta``), which delegates to them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cluster.naming import peer_id
from node.jsapi.render import rfc3339_ns

if TYPE_CHECKING:
    from node.jetstream.meta import MetaLayer


def replicated_block(layer: MetaLayer, stream: Any, account: str) -> dict[str, Any]:
    """StreamInfo ``cluster`` of ``account``'s replicated stream, as its leader sees it."""
    rg = stream.replicated
    sa = layer.machine.stream(stream.cfg.name, account)
    doc: dict[str, Any] = {"name": layer.cluster_name, "raft_group": rg.group_id}
    leader = rg.leader_id
    if leader is not None:
        doc["leader"] = leader
        if rg.is_leader and rg.leader_since_ns:
            doc["leader_since"] = rfc3339_ns(rg.leader_since_ns)
    doc["system_account"] = True
    doc["traffic_account"] = layer.svc.server.accounts.system.name
    st = rg.status()
    last = st.get("last_index") or 0
    seen = st.get("peers") or {}
    replicas = []
    # the local view (nats-server's): every member but this one; on the
    # leader that is every follower, on a follower the leader and the others
    for name in sorted(sa.peers if sa is not None else seen):
        if name == layer.name:
            continue
        p = seen.get(name, {})
        ago = p.get("last_seen_s_ago")
        match = p.get("match_index")
        lag = max(last - match, 0) if isinstance(match, int) else 0
        current = ago is not None and ago < 2.0 and lag == 0
        entry: dict[str, Any] = {
            "name": name,
            "current": bool(current),
            # heard this very tick still counts as seen (0 reads "never seen")
            "active": max(1, int(ago * 1e9)) if ago is not None else 0,
        }
        if lag:
            entry["lag"] = lag
        entry["peer"] = peer_id(name)
        replicas.append(entry)
    doc["replicas"] = replicas
    if sa is not None and sa.desired_ns and set(sa.peers) != set(rg.members):
        # a scale in progress (reference §1.4; no ``status``: trijet's steps differ)
        doc["desired"] = {
            "created": rfc3339_ns(sa.desired_ns),
            "name": layer.cluster_name,
            "replicas": [{"name": p, "peer": peer_id(p)} for p in sa.peers],
            "origin": {"replicas": sa.origin},
        }
    return doc


def cluster_info(layer: MetaLayer) -> dict[str, Any]:
    """``/jsz`` ``meta_cluster`` (and ``/varz`` ``jetstream.meta``)."""
    group = layer.group
    leader = layer.leader
    members = sorted(set(group.members) | {layer.name}) if group is not None else [layer.name]
    status = group.status() if group is not None else {}
    seen = status.get("peers", {}) if isinstance(status, dict) else {}
    doc: dict[str, Any] = {"name": layer.cluster_name}
    if leader is not None:
        doc["leader"] = leader
        doc["peer"] = peer_id(leader)
    replicas = []
    for m in members:
        if m == layer.name and leader is not None:
            continue
        p = seen.get(m, {}) if isinstance(seen, dict) else {}
        ago = p.get("last_seen_s_ago") if isinstance(p, dict) else None
        connected = m == layer.name or layer.links.is_connected(m)
        current = m == layer.name or (connected and (m == leader or layer.is_leader))
        replicas.append(
            {
                "name": m,
                "current": bool(current),
                "active": int(ago * 1e9) if isinstance(ago, int | float) and current else 0,
                "peer": peer_id(m),
            }
        )
    doc["replicas"] = replicas
    doc["cluster_size"] = len(members)
    doc["quorum_needed"] = len(members) // 2 + 1
    doc["pending"] = 0
    doc["pending_requests"] = 0
    doc["pending_infos"] = 0
    return doc


def meta_raftz(layer: MetaLayer) -> dict[str, Any]:
    """The meta group's entry of ``/raftz`` (nats-server's RaftzGroup shape)."""
    group = layer.group
    if group is None:
        return {}
    members = sorted(set(group.members) | {layer.name})
    doc = raftz_entry(layer.name, group.status(), members, system=True)
    doc["ever_had_leader"] = layer._ever_had_leader
    doc["traffic_account"] = layer.svc.server.accounts.system.name
    return doc


def stream_raftz(layer: MetaLayer, stream: Any) -> dict[str, Any]:
    """A replicated stream's group entry of ``/raftz``; trijet adds its
    journal bounds and ``catchup`` counters (compaction and store catch-up)."""
    rg = stream.replicated
    st = rg.status()
    doc = raftz_entry(layer.name, st, rg.members, system=False)
    doc["ever_had_leader"] = st.get("leader") is not None or rg.leader_since_ns > 0
    doc["first_index"] = st.get("first_index", 0)
    doc["journal_entries"] = st.get("journal_entries", 0)
    doc["journal_bytes"] = st.get("journal_bytes", 0)
    doc["snapshots_taken"] = st.get("snapshots_taken", 0)
    doc["snapshots_installed"] = st.get("snapshots_installed", 0)
    doc["catchup"] = st.get("catchup", {})
    # the leader's own journal write overlapping its next cycles (raft.driver)
    doc["durable_index"] = st.get("durable_index", 0)
    doc["overlapped_cycles"] = st.get("overlapped_cycles", 0)
    doc["cycles"] = st.get("cycles", 0)
    doc["fsyncs"] = st.get("fsyncs", 0)
    # sync_interval configured: cycle writes made on the event loop, not fsynced
    doc["inline_writes"] = st.get("inline_writes", 0)
    doc["commits_before_own_write"] = st.get("commits_before_own_write", 0)
    return doc


def raftz_entry(
    self_name: str, st: dict[str, Any], members: list[str], *, system: bool
) -> dict[str, Any]:
    """One group's ``/raftz`` entry (RaftzGroup) from its ``status()``."""
    leader = st.get("leader")
    doc: dict[str, Any] = {
        "id": peer_id(self_name),
        "state": str(st.get("state", "")).upper(),
        "size": len(members),
        "quorum_needed": len(members) // 2 + 1,
        "committed": st.get("commit_index", 0),
        "applied": st.get("applied", 0),
    }
    if leader:
        doc["leader"] = peer_id(leader)
    doc["ever_had_leader"] = bool(leader)
    doc["term"] = st.get("term", 0)
    voted = st.get("voted_for")
    if voted:
        doc["voted_for"] = peer_id(str(voted))
    doc["pindex"] = st.get("last_index", 0)
    if system:
        doc["system_account"] = True
        doc["traffic_account"] = "$SYS"
    peers = {}
    for name, p in sorted((st.get("peers") or {}).items()):
        entry: dict[str, Any] = {"name": name, "known": True}
        if p.get("match_index") is not None:
            entry["last_replicated_index"] = p["match_index"]
        ago = p.get("last_seen_s_ago")
        if ago is not None:
            entry["last_seen"] = f"{ago * 1000:g}ms"
        peers[peer_id(name)] = entry
    doc["peers"] = peers
    return doc
