"""What a server does when the meta log changes a stream it hosts.

Theory of operation: ``node.jetstream.meta.MetaLayer`` hands each applied
effect to the server that hosts the stream.  That server makes the change
real on its own disk (start, reconfigure or stop the local stream, with its
capture subscriptions, consumers and advisories) and answers the client
request that caused it, exactly as a single server answers it after the
change.  ``ensure_local`` is also the start-up path: it reopens a stream
found on disk when it is the assigned incarnation (same creation time) and
otherwise moves the old directory aside (never deletes it) and starts fresh.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from cluster.group_bootstrap import write_bootstrap
from cluster.meta import StreamAssigned, StreamAssignment, StreamRemoved, StreamUpdated
from cluster.model import StreamConfig
from cluster.replica_spec import ReplicaSpec
from cluster.stream_registry import SavedConfigDamaged
from cluster.streams import Stream
from node.jsapi import render
from raft.storage import safe_file_stem

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

log = logging.getLogger(__name__)

#: how long a replica waits for its new group's first leader before answering
LEADER_WAIT_S = 5.0


#: ``ensure_local``'s ``saved`` when the caller has not read the disk
_UNREAD = object()


async def ensure_local(
    svc: JetStreamService,
    sa: StreamAssignment,
    *,
    join: tuple[str, ...] | None = None,
    saved: object = _UNREAD,
) -> Stream | None:
    """Run ``sa`` on this server: reopen it from disk or create it.

    Args:
        sa: the assignment.
        join: a newcomer's first view of its group's members (the members so
            far and itself: it joins a running group, PEER.REMOVE); None: the
            assignment's peers.
        saved: what ``svc.api.saved_stream`` said (when the caller asked it).

    Returns the stream, or None when the data on disk belongs to a newer
    incarnation of the name (``sa`` is a stale entry being re-applied while
    this server catches up; a later entry assigns the newer one).
    """
    cfg = StreamConfig.from_dict(sa.config)
    if join is None and sa.replicated:
        join = await _first_members(svc, sa)
    replica = svc.assignments.replica_spec(sa, members=join)
    if saved is _UNREAD:
        try:
            saved = await svc.api.saved_stream(sa.name)
        except SavedConfigDamaged as exc:
            saved = _damaged(sa, replica, exc)
    assert saved is None or isinstance(saved, tuple)
    if saved is not None and saved[1] == sa.created_ns:
        stream = await svc.api.open_stream(cfg, sa.created_ns, replica=replica)
        await svc.consumers.recover_stream(stream)
        return stream
    if saved is not None and saved[1] > sa.created_ns:
        log.info("event=stale_assignment stream=%s created=%d", sa.name, sa.created_ns)
        return None
    if saved is not None:
        where = await svc.api.quarantine(sa.name)
        log.warning(
            "event=stream_dir_quarantined stream=%s path=%s reason=older_incarnation",
            sa.name,
            where,
        )
    if replica is not None and join is None and saved is None and sa.peers:
        # a brand-new group (not a newcomer, not a reopen): its first placed
        # peer stands for election at once (raft.core ``first_candidate``)
        replica = dataclasses.replace(replica, first_candidate=sa.peers[0])
    return await svc.api.create_stream(cfg, created_ns=sa.created_ns, replica=replica)


async def _first_members(svc: JetStreamService, sa: StreamAssignment) -> tuple[str, ...] | None:
    """The members a replica of ``sa`` starts with when its group's journal
    does not say yet (None: the assignment's peers, as at creation).

    * the holder of an R1 store that was scaled up (a restart before or during
      its regroup, ``node.jetstream.scaling``): itself alone, the store is the
      group's first state (the bootstrap file is written here if it was not);
    * a joiner with nothing of the group yet: the peers before the joiners.
    """
    from node.jetstream import scaling

    me = svc.server.server_name
    raft_dir = svc.api.raft_dir(sa.name)
    if raft_dir is None:
        return None
    if scaling.pending_bootstrap(svc, sa.name):
        # a crash mid-regroup (the group may have a journal already, with no
        # member but this one yet): alone again; the file holds the consumers
        await trio.to_thread.run_sync(scaling.forget_r1_consumers, svc, sa.name)
        return (me,)
    if _has_group_state(raft_dir, sa.group):
        return None
    try:
        saved = await svc.api.saved_stream(sa.name)
    except SavedConfigDamaged:
        saved = None
    if saved is not None and saved[1] == sa.created_ns and not raft_dir.exists():
        # an R1 store (its stream never had a group here) assigned a group meanwhile
        cfg = StreamConfig.from_dict(sa.config)
        entries = await trio.to_thread.run_sync(scaling.r1_consumers_on_disk, svc, cfg)
        await trio.to_thread.run_sync(write_bootstrap, raft_dir, entries)
        await trio.to_thread.run_sync(scaling.forget_r1_consumers, svc, sa.name)
        log.info("event=stream_regroup_at_start stream=%s group=%s", sa.name, sa.group)
        return (me,)
    if me in sa.joiners:
        return scaling.joining_members(sa, me)
    return None


def _has_group_state(raft_dir: Path, group: str) -> bool:
    stem = safe_file_stem(group)
    return (raft_dir / (stem + ".journal")).exists() or (raft_dir / (stem + ".snap")).exists()


def _damaged(
    sa: StreamAssignment, replica: ReplicaSpec | None, exc: SavedConfigDamaged
) -> tuple[StreamConfig, int]:
    """What to do with a stream directory whose config file is damaged: the
    assignment is the config's authority, so a replicated stream whose data
    its own group wrote (the group's journal is there) is reopened under it
    (and the file rewritten); anything else is set aside (quarantined, kept)
    and the stream starts fresh, as an older incarnation would."""
    mine = replica is not None and replica.group_id in exc.groups
    log.error(
        "event=stream_config_damaged stream=%s reason=%r action=%s",
        sa.name,
        str(exc),
        "reopen" if mine else "quarantine",
    )
    return StreamConfig.from_dict(sa.config), sa.created_ns if mine else -1


async def answering(svc: JetStreamService, stream: Stream) -> bool:
    """Whether this server answers for ``stream`` now: R1 its host; a
    replicated stream its leader, once its group has elected one (bounded)."""
    rg = stream.replicated
    if rg is None:
        return True
    with trio.move_on_after(LEADER_WAIT_S):
        await rg.raft.wait_leader()
        if rg.is_leader:  # its LEADER_ELECTED goes out before anything else
            await rg.lead_announced.wait()
    return rg.is_leader


def _current(svc: JetStreamService, sa: StreamAssignment) -> bool:
    """Whether ``sa`` is still the stream's assignment (effects are handled
    after their entry applied; a later entry may have replaced it)."""
    return svc.assignments.assignment(sa.name) is sa


async def assigned(svc: JetStreamService, effect: StreamAssigned) -> None:
    """A stream this server hosts was created (or an identical create re-sent)."""
    from node.jetstream.streams_api import info_dict

    sa = effect.assignment
    if not _current(svc, sa):
        return
    stream = svc.api.streams.get(sa.name)
    fresh = stream is None and effect.created
    if stream is None:
        try:
            on_disk = await svc.api.saved_stream(sa.name)
        except SavedConfigDamaged:
            on_disk = _UNREAD  # ensure_local reads it again and decides
        fresh = fresh and on_disk is None
        stream = await ensure_local(svc, sa, saved=on_disk)
        if stream is None:
            return
    if not await answering(svc, stream):
        return
    if effect.reply or effect.origin:  # a request: answered (or, without a reply, counted)
        # the other servers know the new capture interest before the client
        # hears of the stream, so its first publish from any node lands
        await svc.server.routes_barrier()
        info = info_dict(svc, stream)
        # nats-server says did_create on every create answer of a single
        # server; a cluster's leaves it out when the stream was already there
        body = render.stream_create_response(info, did_create=fresh or not svc.clustered)
        svc.answer(effect.reply.encode(), body, effect.origin)
    if fresh:  # after the answer's audit, as nats-server
        svc.advisories.stream_action("create", sa.name, stream.cfg)


async def updated(svc: JetStreamService, effect: StreamUpdated) -> None:
    """A stream this server hosts has a new config."""
    from node.jetstream.streams_api import apply_update, info_dict

    sa = effect.assignment
    if not _current(svc, sa):
        return
    cfg = StreamConfig.from_dict(sa.config)
    stream = svc.api.streams.get(sa.name)
    if stream is None:
        stream = await ensure_local(svc, sa)
        if stream is None:
            return
    elif stream.cfg != cfg:
        if await answering(svc, stream):
            # R1, or the leader: the new policy goes through the stream's log
            stream = await apply_update(svc, stream.cfg, cfg)
        else:  # a follower takes the config; the policy reaches it through the log
            await svc.api.adopt_config(cfg)
            return
    if not await answering(svc, stream):
        return
    if effect.reply or effect.origin:
        await svc.server.routes_barrier()
        body = render.stream_update_response(info_dict(svc, stream))
        svc.answer(effect.reply.encode(), body, effect.origin)
    # after the answer's audit, changed or not, as nats-server
    svc.advisories.stream_action("modify", sa.name, cfg)


async def removed(svc: JetStreamService, effect: StreamRemoved) -> None:
    """A stream this server runs was deleted (the proposer answers)."""
    from node.jetstream.streams_api import remove_local

    sa = effect.assignment
    local = svc.api.streams.get(sa.name)
    current = svc.assignments.assignment(sa.name)
    if local is None or local.created_ns != sa.created_ns:
        return  # another incarnation runs here
    if current is not None and current.created_ns == local.created_ns:
        return
    await remove_local(svc, local)
