"""Consumers of replicated streams on this server: shells, leadership, requests.

Theory of operation
-------------------
A replicated stream's consumers live in its Raft group
(``cluster.consumer_table``): CONSUMER.CREATE/UPDATE/PAUSE and DELETE,
answered by the stream's leader, propose ``ConsumerAssign``/``ConsumerRemove``
through the stream's group; every replica applies them to its
``ConsumerTable``, whose listener here makes or drops the consumer's shell
(``ConsumerRegistry.adopt``/``drop``), synchronously, inside apply.  A
restarted server gets the same shells from the journal replay.

Only the stream's leader works a consumer: ``activate`` (on gaining the lead,
or for a consumer assigned while leading) subscribes the ack subject, starts
the pull or push dispatcher and has the consumer ``take_lead`` (catch-up
ops; delivery waits for them); ``deactivate`` (lead lost) stops all that
again, leaving the shell and its state.  The leader also owns retention: on
gaining the lead it proposes the interest filters and sweeps messages nobody
needs (acks the old leader committed but whose removal it did not propose);
followers never propose.

Group sizes (``num_replicas`` as reference §3): a durable with 0 inherits the
stream's R, an ephemeral is R1 unless it asks for more.  Whatever the number,
the state of every consumer of a replicated stream rides in the stream's
group (so an R1 consumer survives its leader too); the number only shapes
the group name and ConsumerInfo's ``cluster`` block (R1: name and leader).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import trio

from cluster.consumer_fsm import select_start
from cluster.consumer_model import ConsumerConfig
from cluster.consumer_table import config_bytes
from cluster.consumers import Consumer
from cluster.model import Storage
from cluster.naming import group_name
from cluster.ops import ConsumerAssign, ConsumerRemove
from cluster.streams import Stream
from raft.errors import RaftError

if TYPE_CHECKING:
    from node.jetstream.delivery import ConsumerManager

log = logging.getLogger(__name__)


def consumer_replicas(stream: Stream, cfg: ConsumerConfig) -> int:
    """The consumer's group size (reference §3)."""
    if cfg.num_replicas > 0:
        return min(cfg.num_replicas, stream.cfg.num_replicas)
    return stream.cfg.num_replicas if cfg.durable_name else 1


class ReplicatedConsumers:
    """The ``ConsumerManager``'s part for consumers of replicated streams.

    Args:
        mgr: the manager (registry, dispatchers, advisories).
    """

    def __init__(self, mgr: ConsumerManager) -> None:
        self.mgr = mgr
        self.rng = mgr.svc.server.rng

    # -- streams ------------------------------------------------------------------

    def stream_started(self, stream: Stream) -> None:
        """Follow ``stream``'s consumer table and leadership; shells for the
        consumers it already holds (a replay may have run before this)."""
        rg = stream.replicated
        assert rg is not None
        table = rg.rfsm.consumers
        table.listeners.append(lambda event, name: self._on_table(stream, event, name))
        rg.leader_listeners.append(lambda lead: self._leadership(stream, lead))
        for name in list(table.entries):
            self._on_table(stream, "assigned", name)
        if rg.is_leader:
            self._leadership(stream, True)

    def _current(self, stream: Stream) -> bool:
        return self.mgr.svc.api.streams.get(stream.cfg.name) is stream

    def _on_table(self, stream: Stream, event: str, name: str) -> None:
        if not self._current(stream):
            return
        mgr = self.mgr
        key = (stream.cfg.name, name)
        if event == "removed":
            mgr.detach(key, closing=True)
            c = mgr.registry.drop(stream.cfg.name, name)
            if c is not None and stream.is_leader:
                mgr.action(c, "delete")
                if c.retention is not None:
                    mgr.nursery.start_soon(self._retention_after_removal, c)
            return
        before = mgr.registry.of(stream.cfg.name).get(name)
        entry = stream.replicated.rfsm.consumers.entries.get(name) if stream.replicated else None
        if before is not None and entry is not None and before.fsm is not entry.fsm:
            mgr.detach(key, closing=True)  # another incarnation of the name: its shell goes
            before = None
        old_cfg = before.cfg if before is not None else None
        c = mgr.registry.adopt(stream, name)
        if c is None:
            return
        if c is not before:
            c.outcome_listeners.append(lambda out: mgr.advise(c, out))
            if stream.is_leader:
                self.activate(c)
        elif old_cfg is not None and old_cfg != c.cfg and c.leading:
            mgr.reconfigured(c, old_cfg)

    async def _retention_after_removal(self, c: Consumer) -> None:
        assert c.retention is not None
        try:
            await c.retention.consumer_removed(c)
        except RaftError as exc:
            log.info("event=retention_after_removal_failed consumer=%s reason=%r", c.name, exc)

    def _leadership(self, stream: Stream, lead: bool) -> None:
        if not self._current(stream):
            return
        for c in list(self.mgr.registry.of(stream.cfg.name).values()):
            if lead:
                self.activate(c)
            else:
                self.deactivate(c)
        if lead:
            r = self.mgr.registry.retention(stream)
            if r is not None:
                self.mgr.nursery.start_soon(self._catch_up_retention, r)

    async def _catch_up_retention(self, r: Any) -> None:
        try:
            await r.refresh_interest()
            await r.sweep()
        except RaftError as exc:
            log.info("event=retention_catch_up_failed stream=%s reason=%r", r.stream.cfg.name, exc)

    def activate(self, c: Consumer) -> None:
        """This replica leads ``c``'s stream: deliver and take acks here."""
        if c.leading or c.closed:
            return
        c.set_leading(True)
        self.mgr.attach(c)

        async def take() -> None:
            if not await c.take_lead() and c.leading and not c.closed:
                log.warning("event=consumer_not_ready stream=%s consumer=%s", *c_key(c))

        self.mgr.nursery.start_soon(take)

    def deactivate(self, c: Consumer) -> None:
        """This replica no longer leads: stop delivery and acks (state kept)."""
        if not c.leading:
            return
        self.mgr.detach((c.stream.cfg.name, c.name), closing=False, lead_lost=True)
        c.set_leading(False)

    # -- requests (on the stream's leader) ---------------------------------------------

    async def create(self, stream: Stream, name: str, cfg: ConsumerConfig) -> Consumer | None:
        """Propose a new consumer; its shell once applied here (None: not
        committed, the request stays unanswered as nats-server leaves it)."""
        rg = stream.replicated
        assert rg is not None
        start, lss = await trio.to_thread.run_sync(select_start, cfg, stream.store)
        file = stream.cfg.storage is Storage.FILE and not cfg.mem_storage
        group = group_name("C", consumer_replicas(stream, cfg), file, self.rng)
        op = ConsumerAssign(name, config_bytes(cfg), time.time_ns(), group, start, lss)
        return await self._propose_assign(stream, op)

    async def update(self, c: Consumer, cfg: ConsumerConfig) -> Consumer | None:
        """Propose a changed config (kept creation time and group name)."""
        op = ConsumerAssign(c.name, config_bytes(cfg), c.created_ns, c.group_name or "C")
        return await self._propose_assign(c.stream, op)

    async def _propose_assign(self, stream: Stream, op: ConsumerAssign) -> Consumer | None:
        rg = stream.replicated
        assert rg is not None
        try:
            await rg.propose(op)
        except RaftError as exc:
            log.warning("event=consumer_assign_failed consumer=%s reason=%r", op.consumer, exc)
            return None
        c = self.mgr.registry.of(stream.cfg.name).get(op.consumer)
        r = c.retention if c is not None else None
        if r is not None and r.interest:
            try:
                await r.refresh_interest()
            except RaftError as exc:
                log.info("event=interest_refresh_failed consumer=%s reason=%r", op.consumer, exc)
        return c

    async def delete(self, stream: Stream, name: str) -> bool:
        """Propose the removal; True once applied (the table listener stops
        the shell everywhere)."""
        rg = stream.replicated
        assert rg is not None
        try:
            await rg.propose(ConsumerRemove(name))
        except RaftError as exc:
            log.warning("event=consumer_remove_failed consumer=%s reason=%r", name, exc)
            return False
        return True


def c_key(c: Consumer) -> tuple[str, str]:
    return c.stream.cfg.name, c.name
