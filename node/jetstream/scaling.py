"""Scaling a stream through STREAM.UPDATE ``num_replicas`` (1 ↔ 2 ↔ 3).

Theory of operation
-------------------
The meta leader proposes the update with what it sees (``scale_request``:
servers online, a group name for a stream's first Raft group, the stream's
leader as its group answers on ``$JSC.GM.<group>``); meta ``apply`` decides
the new peers (``cluster.meta.machine``).  Every server then acts on the
*current* assignment (``scaled``), reusing the membership machinery of
STREAM.PEER.REMOVE (``node.jetstream.membership``):

* the R1 holder of a stream that gets its first group (``regroup``) stops its
  ``LocalGroup`` (nothing in flight), takes its R1 consumers' configs and
  states into the group's bootstrap file, and runs the same store as a Raft
  group of itself alone (``cluster.replicated``, Bootstrap): sequence numbers
  and the dedupe window are the store's, so nothing is renumbered and a
  ``Nats-Msg-Id`` retry of a publish it stored is still a duplicate;
* a newcomer (a *joiner*) starts an empty replica knowing only the peers
  that were there before it (never the other joiners: two empty joiners could
  otherwise elect each other over the data's holder);
* the stream's leader reconciles the Raft membership with the assignment one
  change at a time (adds only once the group's bootstrap snapshot is taken;
  newcomers install it and fetch the messages through ``cluster.catchup``,
  and a replica with a hole never leads);
* a peer no longer assigned keeps its replica until the leader has it out of
  the group, then deletes its copy; a leader that leaves hands the lead over
  first (the proposer put the leader it saw first, so it stays when it can).

The client's answer comes from the stream's leader (the host of an R1, the
holder once its new group elected itself), with the new config.  A stream
scaled down to one replica keeps running its (one-member) Raft group: its
consumers live in that group's log.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import trio

from cluster.consumer_table import config_bytes
from cluster.group_bootstrap import ConsumerEntry, read_bootstrap, write_bootstrap
from cluster.meta import StreamAssignment, StreamUpdated, scale_fields
from cluster.model import Storage, StreamConfig
from cluster.naming import fresh_group_name, group_name
from cluster.streams import Stream

if TYPE_CHECKING:
    from node.jetstream.service import JetStreamService

log = logging.getLogger(__name__)

#: how long the proposer waits for the stream's group to name its leader
LEADER_ASK_S = 0.5
#: how long an R1 consumer's state flush may take while its stream regroups
FLUSH_S_MAX = 5.0


async def scale_request(
    svc: JetStreamService, sa: StreamAssignment, cfg: StreamConfig
) -> dict[str, Any]:
    """The proposer's view for a scaling update of ``sa`` to ``cfg``."""
    meta = svc.meta
    assert meta is not None
    leader = ""
    if sa.replicated and cfg.num_replicas < len(sa.peers):
        leader = await ask_leader(svc, sa.group)
    return scale_fields(
        group=fresh_group_name(
            "S", cfg.num_replicas, cfg.storage is Storage.FILE, meta.rng, meta.machine.groups()
        ),
        seed=meta.rng.getrandbits(63),
        online=meta.online(),
        unique_tag=meta.unique_tag,
        leader=leader,
        created_ns=time.time_ns(),
    )


async def ask_leader(svc: JetStreamService, group: str) -> str:
    """The leader a stream group's leader names on ``$JSC.GM`` ("" if none in time)."""
    from node.jetstream.membership import ask_group

    doc = await ask_group(svc, group, LEADER_ASK_S)
    leader = None if doc is None else doc.get("leader")
    return leader if isinstance(leader, str) else ""


def joining_members(sa: StreamAssignment, me: str) -> tuple[str, ...]:
    """A joiner's first view of its group: the peers that were there before
    the joiners, and itself."""
    return tuple(sorted({*(p for p in sa.peers if p not in sa.joiners), me}))


async def scaled(svc: JetStreamService, effect: StreamUpdated) -> None:
    """A stream's peers changed through STREAM.UPDATE: this server's part."""
    from node.jetstream import meta_effects
    from node.jetstream.streams_api import info_dict

    assert svc.meta is not None
    me = svc.server.server_name
    sa = effect.assignment
    if svc.meta.assignment(sa.name) is not sa:
        return  # a later entry changed it again: that one's effect acts
    cfg = StreamConfig.from_dict(sa.config)
    local = svc.api.streams.get(sa.name)
    log.info(
        "event=stream_scaled stream=%s peers=%s old=%s",
        sa.name,
        ",".join(sa.peers),
        ",".join(effect.old_peers),
    )
    if local is not None and local.created_ns != sa.created_ns:
        return  # another incarnation runs here
    if me in sa.peers:
        if local is None:
            log.info("event=stream_replica_starting stream=%s group=%s", sa.name, sa.group)
            # its first members from what its disk holds (``meta_effects``): the
            # holder restarted before it regrouped bootstraps, a joiner joins
            await meta_effects.ensure_local(svc, sa)
            return  # a joiner never answers (nor a holder back from a crash): the leader does
        if local.replicated is None and sa.replicated:
            local = await regroup(svc, local, sa)
        else:
            local = await _take_config(svc, local, cfg)
        svc.membership.leadership(local, local.is_leader)
    elif local is not None:  # a leaver (the leader too, when the proposer did not know it)
        local = await _take_config(svc, local, cfg)
        svc.membership.leave(local)
    else:
        return
    if effect.reply and await meta_effects.answering(svc, local):
        from node.jsapi import render

        # the view as the change starts (``desired``), as the reference answers at once
        body = render.stream_update_response(info_dict(svc, local))
        await svc.server.routes_barrier()
        svc.answer(effect.reply.encode(), body)
        log.info("event=stream_scale_answered stream=%s", sa.name)


async def _take_config(svc: JetStreamService, stream: Stream, cfg: StreamConfig) -> Stream:
    """The new config on this replica: the leader proposes the policy through
    the log (other fields may have changed with the replicas), a follower adopts it."""
    from node.jetstream.streams_api import apply_update

    if stream.cfg == cfg:
        return stream
    if stream.is_leader:
        return await apply_update(svc, stream.cfg, cfg)
    await svc.api.adopt_config(cfg)
    return stream


async def regroup(svc: JetStreamService, stream: Stream, sa: StreamAssignment) -> Stream:
    """Turn this server's R1 ``stream`` into the first member of ``sa``'s group."""
    assert svc.meta is not None
    name = sa.name
    cfg = StreamConfig.from_dict(sa.config)
    log.info("event=stream_regroup stream=%s group=%s", name, sa.group)
    svc.release(name)  # no capture while the group changes
    entries = await _take_r1_consumers(svc, stream, cfg)
    raft_dir = svc.api.raft_dir(name)
    if raft_dir is not None:
        await trio.to_thread.run_sync(write_bootstrap, raft_dir, entries)
        # the bootstrap file holds them now
        await trio.to_thread.run_sync(forget_r1_consumers, svc, name)
    replica = svc.meta.replica_spec(sa, members=(svc.server.server_name,))
    assert replica is not None
    new = await svc.api.regroup_stream(cfg, replica)
    svc.advisories.stream_action("modify", name, new.cfg)
    return new


async def _take_r1_consumers(
    svc: JetStreamService, stream: Stream, cfg: StreamConfig
) -> list[ConsumerEntry]:
    """Stop the R1 consumers of ``stream`` and return their configs and states."""
    assert svc.meta is not None
    out: list[ConsumerEntry] = []
    mgr = svc.consumers
    for c in sorted(mgr.registry.of(cfg.name).values(), key=lambda c: c.name):
        mgr.detach((cfg.name, c.name), closing=False)
        with trio.move_on_after(FLUSH_S_MAX):
            try:
                await c.flush()
            except OSError as exc:  # the state in memory is what moves
                log.warning("event=consumer_flush_failed consumer=%s reason=%r", c.name, exc)
        file = cfg.storage is Storage.FILE and not c.cfg.mem_storage
        group = group_name("C", consumer_replicas_for(cfg, c.cfg), file, svc.meta.rng)
        out.append((c.name, config_bytes(c.cfg), c.created_ns, group, c.fsm.snapshot()))
    mgr.drop_stream(cfg.name)
    return out


def r1_consumers_on_disk(svc: JetStreamService, cfg: StreamConfig) -> list[ConsumerEntry]:
    """The R1 consumers saved for stream ``cfg`` (configs and states), for a
    holder that restarted before it regrouped (blocking: run in a thread)."""
    from cluster.consumer_fsm import ConsumerStateMachine
    from store.consumer import FileConsumerStore

    assert svc.meta is not None
    reg = svc.consumers.registry
    out: list[ConsumerEntry] = []
    if reg.dir is None:
        return out
    for name, ccfg, created_ns in reg.saved(cfg.name):
        store = FileConsumerStore(reg.dir / "streams" / cfg.name / "consumers" / name)
        try:
            state = ConsumerStateMachine(name, store, save_each_op=False).snapshot()
        finally:
            store.close()
        file = cfg.storage is Storage.FILE and not ccfg.mem_storage
        group = group_name("C", consumer_replicas_for(cfg, ccfg), file, svc.meta.rng)
        out.append((name, config_bytes(ccfg), created_ns, group, state))
    return out


def forget_r1_consumers(svc: JetStreamService, name: str) -> None:
    """Remove stream ``name``'s R1 consumer directories (blocking)."""
    import shutil

    reg = svc.consumers.registry
    if reg.dir is not None:
        shutil.rmtree(reg.dir / "streams" / name / "consumers", ignore_errors=True)


def consumer_replicas_for(stream_cfg: StreamConfig, cfg: Any) -> int:
    """A consumer's group size on a stream of ``stream_cfg`` (reference §3)."""
    if cfg.num_replicas > 0:
        return int(min(cfg.num_replicas, stream_cfg.num_replicas))
    return stream_cfg.num_replicas if cfg.durable_name else 1


def pending_bootstrap(svc: JetStreamService, name: str) -> bool:
    """Whether stream ``name``'s directory holds a group bootstrap not yet done."""
    d = svc.api.raft_dir(name)
    try:
        return d is not None and read_bootstrap(d) is not None
    except ValueError:
        return True
