"""RaftGroup: the one API the rest of trijet uses to replicate a state machine.

Theory of operation
-------------------
A :class:`RaftGroup` is one member of one Raft group: a
:class:`~raft.core.RaftCore` (pysyncobj underneath) owned by a
:class:`~raft.driver.RaftDriver` task, talking to the other members through a
shared :class:`~raft.links.PeerLinks`. Others never touch the core; they
``await`` the group's methods.

Start it inside a nursery::

    group = RaftGroup("g-7f3a", "n1", ["n2", "n3"], fsm, links, OsDisk(dir))
    await nursery.start(group.run)
    result = await group.propose(b"...")

``propose`` on a follower forwards the proposal to the leader (pysyncobj's
``apply_command``) unless ``RaftConfig.forward_proposals`` is False, in which
case it raises :class:`~raft.errors.NotLeader` with the leader hint at once.
Proposals made in the same moment share one Raft entry (a batch).
``start`` queues a proposal without awaiting it and calls back when it is
resolved (from the driver's task), so an owner can keep several entries in
flight.

Cancellation (all async methods): cancelling the *wait* does not withdraw the
request. A cancelled ``propose`` may still be committed and applied on every
replica (its result is then discarded); callers that retry must make entries
idempotent (e.g. a message id checked in ``apply``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

import trio

from raft import trace
from raft.config import RaftConfig
from raft.core import RaftCore
from raft.driver import RaftDriver
from raft.errors import NotLeader, ProposalDropped, RaftError, TransferFailed
from raft.fsm import StateMachine
from raft.links import PeerLinks
from raft.proposal import LeaderState, Proposal
from raft.storage import Disk

__all__ = ["LeaderState", "RaftConfig", "RaftGroup"]

log = logging.getLogger(__name__)


class RaftGroup:
    """One member of a Raft group.

    Args:
        group_id: the group's name (never reused; the meta group is ``_meta_``).
        node_id: this node's id on the links.
        peers: the other members' node ids at creation (the journal/snapshot's
            configuration wins on restart).
        fsm: a fresh state machine; the group restores it from snapshot + journal.
        links: the node's peer links (shared by all groups).
        disk: where ``<group>.journal`` and ``<group>.snap`` live (OsDisk or MemoryDisk).
        config: timing and bounds.
        rng: seeded RNG for election timeouts (default: unseeded).
        fsync_in_thread: run the per-cycle fsync in a worker thread.
        leadership_buffer: capacity of each leadership subscription channel.
        first_candidate: of a new group, the member that stands for election
            at once (see :class:`RaftCore`).
    """

    def __init__(
        self,
        group_id: str,
        node_id: str,
        peers: list[str],
        fsm: StateMachine,
        links: PeerLinks,
        disk: Disk,
        config: RaftConfig | None = None,
        *,
        rng: random.Random | None = None,
        fsync_in_thread: bool = True,
        leadership_buffer: int = 16,
        first_candidate: str | None = None,
    ) -> None:
        self._first_candidate = first_candidate
        self.group_id = group_id
        self.node_id = node_id
        self.config = config or RaftConfig()
        self._peers = list(peers)
        self._fsm = fsm
        self._links = links
        self._disk = disk
        self._rng = rng or random.Random()
        self._fsync_in_thread = fsync_in_thread
        self._leadership_buffer = leadership_buffer
        self._subscribers: list[trio.MemorySendChannel[LeaderState]] = []
        self._inflight: set[Proposal] = set()
        self._core: RaftCore | None = None
        self._driver: RaftDriver | None = None
        self._closed = False
        self._leader_changed = trio.Event()

    # ------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Build the core (restoring state from disk) and drive it until cancelled.

        Cancellation: the member stops; proposals still waiting fail with
        ``ProposalDropped(maybe_committed=True)``.
        """
        core = RaftCore(
            self.group_id,
            self.node_id,
            self._peers,
            self._fsm,
            self._disk,
            self.config,
            now=trio.lowlevel.current_clock().current_time,
            rng=self._rng,
            first_candidate=self._first_candidate,
        )
        self._core = core
        self._driver = RaftDriver(
            core,
            self._links,
            fsync_in_thread=self._fsync_in_thread,
            on_leadership=self._publish,
        )
        try:
            await self._driver.run(task_status=task_status)
        finally:
            self._closed = True
            err = ProposalDropped("group closed", maybe_committed=True)
            core.fail_all(err)
            for p in list(self._inflight):
                p._finish(None, err)
            for s in self._subscribers:
                s.close()

    def _need(self) -> tuple[RaftCore, RaftDriver]:
        if self._core is None or self._driver is None:
            raise RuntimeError("RaftGroup is not running (await nursery.start(group.run))")
        if self._closed:
            raise ProposalDropped("group closed", maybe_committed=False)
        return self._core, self._driver

    # ------------------------------------------------------------ proposals

    async def _await(self, p: Proposal) -> object:
        if not p.done:
            ev = trio.Event()
            p.on_done = lambda _p: ev.set()
            self._inflight.add(p)
            try:
                await ev.wait()
            finally:
                self._inflight.discard(p)
        if p.error is not None:
            raise p.error
        return p.result

    async def propose(self, entry: bytes) -> object:
        """Replicate ``entry`` and return the state machine's result for it.

        Raises:
            NotLeader: the leader (or this member, when not forwarding) refused;
                not appended; ``leader_id`` is the hint.
            NoLeader: no leader known; not appended.
            QueueFull: too many proposals pending; not appended.
            ProposalDropped: discarded by a leader change (``maybe_committed``
                tells whether it may still have been committed).
            ApplyFailed: the state machine raised while applying it.
            ValueError: entry larger than ``config.proposal_bytes_max``.

        Cancellation: the proposal stays queued and may still commit.
        """
        core, driver = self._need()
        p = core.propose(entry)
        driver.kick()
        return await self._await(p)

    async def read_barrier(self) -> None:
        """Return once this member, as leader, committed and applied an empty
        entry (``RaftCore.barrier``): what it reads afterwards is at least as
        new as anything committed before the call.

        Raises:
            NotLeader, NoLeader: not the leader (never forwarded).
            ProposalDropped: the entry was overwritten (the lead was lost).
        """
        core, driver = self._need()
        p = core.barrier()
        driver.kick()
        await self._await(p)

    def start(
        self,
        entry: bytes,
        on_done: Callable[[Proposal], None],
        *,
        leader_only: bool = False,
        kick: bool = True,
    ) -> Proposal:
        """Queue ``entry`` for replication without waiting for it.

        ``on_done(p)`` is called once, from the driver's task, when the
        proposal is resolved (``p.result``, or ``p.error`` with the errors of
        :meth:`propose`): at the very point where ``propose`` would return --
        committed, durable on a majority and applied here.  It must not block;
        what it raises is logged.  Proposals started together share an entry,
        and entries of later cycles are replicated while earlier ones wait for
        their majority (pipelining).

        ``leader_only``: never forwarded (``RaftCore.propose``).

        ``kick``: False leaves the driver alone; the caller then calls
        :meth:`proposed` once it has started what goes together (one cycle,
        one Raft entry for them all, run at once by a parked leader).

        Raises:
            QueueFull, NotLeader, NoLeader, ValueError: refused at once, as
                :meth:`propose` (``on_done`` is then never called).
        """
        core, driver = self._need()
        if trace.ON:
            trace.stamp("propose", core.group_id, core.journal.last_index, core.commit_index)
        p = core.propose(entry, leader_only=leader_only)
        inflight = self._inflight
        inflight.add(p)
        gid = self.group_id

        def done(p: Proposal) -> None:
            inflight.discard(p)
            try:
                on_done(p)
            except Exception:
                log.exception("event=on_done_raised group=%s", gid)

        p.on_done = done
        if kick:
            driver.kick()
        return p

    def proposed(self) -> None:
        """Proposals were started: a parked leader cycles at once in the
        caller's task (``RaftDriver.proposed``), else the driver is kicked."""
        if self._driver is not None:
            self._driver.proposed()

    # ------------------------------------------------------------ leadership

    @property
    def is_leader(self) -> bool:
        """Leading and serving: this term's first entry is applied (``RaftCore.leader_ready``)."""
        return self._core is not None and self._core.leader_ready

    @property
    def leader_id(self) -> str | None:
        """The serving leader: None while this member leads but does not serve yet
        (``is_leader``), as while a group elects; requests wait as they do then."""
        return None if self._core is None else self._core.serving_leader_id

    @property
    def term(self) -> int:
        return 0 if self._core is None else self._core.term

    def subscribe_leadership(self) -> trio.MemoryReceiveChannel[LeaderState]:
        """A channel that receives each leadership change (term, leader_id, is_leader).

        The first item is the current state. A subscriber that falls
        ``leadership_buffer`` items behind misses changes (logged); the current
        state is always available from ``is_leader``/``leader_id``.
        """
        send, recv = trio.open_memory_channel[LeaderState](self._leadership_buffer)
        if self._core is not None:
            send.send_nowait(self._core.leader_state())
        self._subscribers.append(send)
        return recv

    def _publish(self, state: LeaderState) -> None:
        log.info(
            "event=leadership group=%s node=%s term=%d leader=%s is_leader=%s",
            self.group_id,
            self.node_id,
            state.term,
            state.leader_id,
            state.is_leader,
        )
        ev, self._leader_changed = self._leader_changed, trio.Event()
        ev.set()
        for s in list(self._subscribers):
            try:
                s.send_nowait(state)
            except trio.WouldBlock:
                log.warning("event=leadership_subscriber_full group=%s", self.group_id)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(s)

    async def wait_leader(self) -> str:
        """Wait until some leader is known and return its id (``leader_id``).

        Cancellation: nothing to undo.
        """
        while True:
            lid = self.leader_id
            if lid is not None:
                return lid
            await self._leader_changed.wait()

    async def step_down(
        self, timeout_s: float | None = None, target: str | None = None
    ) -> str | None:
        """Hand leadership to ``target``, or the most caught-up follower (Raft TimeoutNow).

        Retries until a follower is fully caught up, then waits until this
        member is no longer leader.

        Returns:
            The new leader's id if already known, else None.

        Raises:
            NotLeader: this member is not the leader.
            TransferFailed: still leader after ``timeout_s`` (default two maximum
                election timeouts).

        Cancellation: a transfer already requested may still happen.
        """
        core, driver = self._need()
        if not core.is_leader:
            raise NotLeader(core.leader_id)
        timeout = timeout_s if timeout_s is not None else 2 * self.config.election_timeout_s_max
        with trio.move_on_after(timeout):
            while core.is_leader:
                p = core.transfer_leadership(target)
                driver.kick()
                try:
                    await self._await(p)
                except RaftError:
                    pass
                with trio.move_on_after(self.config.heartbeat_s):
                    await self._leader_changed.wait()
            lid = core.leader_id
            return lid if lid != self.node_id else None
        raise TransferFailed(f"still leader after {timeout} s")

    # ------------------------------------------------------------ membership

    async def _membership(self, op: str, peer_id: str, timeout_s: float | None) -> None:
        core, driver = self._need()
        timeout = timeout_s if timeout_s is not None else 4 * self.config.election_timeout_s_max
        last: RaftError | None = None
        with trio.move_on_after(timeout):
            while True:
                p = core.change_membership(op, peer_id)
                driver.kick()
                try:
                    await self._await(p)
                    return
                except ProposalDropped as e:
                    if e.maybe_committed:
                        raise
                    last = e  # denied: another change in flight or no-op not applied yet
                await driver.wait_cycle()
                await trio.sleep(self.config.heartbeat_s)
        raise last or ProposalDropped("membership change timed out", maybe_committed=True)

    async def add_member(self, peer_id: str, timeout_s: float | None = None) -> None:
        """Add ``peer_id`` to the group (leader only; one change at a time).

        Start the new member first with ``peers`` = the current members. Returns
        once the change is committed.

        Raises:
            NotLeader: this member is not the leader.
            ProposalDropped: refused until the timeout (another change pending).

        Cancellation: the change may still be committed.
        """
        await self._membership("add", peer_id, timeout_s)

    async def remove_member(self, peer_id: str, timeout_s: float | None = None) -> None:
        """Remove ``peer_id`` (not the leader itself: ``step_down`` first).

        Raises, cancellation: as :meth:`add_member`.
        """
        await self._membership("rem", peer_id, timeout_s)

    @property
    def members(self) -> list[str]:
        return [] if self._core is None else self._core.members

    async def sync_journal(self) -> None:
        """Interval mode (``RaftConfig.journal_fsync`` off): fsync the journal's
        appends written so far; nothing to do otherwise or when not running."""
        if self._driver is not None and not self._closed:
            await self._driver.sync_journal()

    # ------------------------------------------------------------ introspection

    async def wait_cycle(self) -> None:
        """Wait until the driver completes its next cycle (at least one per heartbeat
        or election timeout). Cancellation: nothing to undo."""
        _, driver = self._need()
        await driver.wait_cycle()

    def status(self) -> dict[str, Any]:
        """term, leader, commit_index, applied, last_index, peers{match_index,
        next_index, last_seen_s_ago}, fsyncs, snapshot counts."""
        if self._core is None:
            return {"group": self.group_id, "node": self.node_id, "state": "stopped"}
        st = self._core.status()
        if self._driver is not None:
            st["cycles"] = self._driver.cycles
            st["deliveries_before_timer"] = self._driver.deliveries_before_timer
            st["overlapped_cycles"] = self._driver.overlapped_cycles
            st["background_writes"] = self._driver.background_writes
            st["inline_writes"] = self._driver.inline_writes
        return st

    @property
    def write_failing(self) -> bool:
        """True while this member's journal writes fail (disk full …): it is behind."""
        return self._driver is not None and self._driver.write_failing

    def kick(self) -> None:
        """Ask for a cycle now (e.g. a state machine that held applies back is ready)."""
        if self._driver is not None:
            self._driver.kick()

    def force_log_compaction(self) -> None:
        """Take a snapshot and compact the journal at the next cycle."""
        core, driver = self._need()
        core.force_log_compaction()
        driver.kick()

    @property
    def handing_over(self) -> bool:
        """This member asked to hand its lead over (``step_down``) within the
        last maximum election timeout: a lead lost now went to the successor."""
        return self._core is not None and self._core.handing_over

    @property
    def transferring(self) -> bool:
        """This member leads but is handing the lead over: it holds new entries
        until its successor wins (or the hold runs out)."""
        return self._core is not None and self._core.transferring

    @property
    def core(self) -> RaftCore:
        """The underlying core (tests and chaos tooling only)."""
        core, _ = self._need()
        return core
