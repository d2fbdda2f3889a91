"""Synchronous core of one Raft group member, driven in cycles (Ready/Advance on pysyncobj).

Theory of operation
-------------------
:class:`RaftCore` is the sans-IO heart shared by the trio driver
(:mod:`raft.driver`) and the deterministic simulator (:mod:`chaos.sim`). It
owns one :class:`TrijetSyncObj` (a ``SyncObj`` with ``autoTick=False``,
``useFork=False``, dynamic membership, no poller, no pipe, no threads) and
drives it in *cycles* — etcd's Ready/Advance rebuilt around a library that
lacks it::

    core.receive(peer, payload)   # any number of times, buffered (bounded)
    core.propose(entry)           # buffered (bounded), batched per cycle
    ready = core.cycle()          # feed inbound, submit batches, doTick(0)
    send ready.early_outbox       # a leader's append-entries may go first
    ready.sync()                  # journal: one append + one fsync (group commit)
    send ready.outbox             # only now may answers leave the node
    ready.release()               # resolve proposals whose entries applied

``cycle(defer_apply=True)`` (the trio driver) leaves the committed entries to
``ready.apply()``, called after the outbox is sent and before ``release``.

Two optional state-machine gates (``raft.fsm``): ``can_apply()`` False holds
committed entries back (a replica installing a snapshot whose data it is
still fetching), ``can_lead()`` False keeps this member from standing for
election or taking a transferred lead (a replica with a hole never leads):
its election deadline is pushed forward every cycle, so it only ever votes.

``cycle`` never blocks and never does network I/O. Nothing but a leader's
append-entries leaves the node before ``sync`` (Raft requires persistence
before answering an RPC, not before replicating): votes and append-entries
responses are covered by the fsync of the cycle that produced them.  A
leader's own ``sync`` may lag behind its cycles (the trio driver's write
overlap, ``raft.driver``): it then counts itself towards a majority only up
to its journal's ``durable_index`` (``_cap_matches``), so an entry commits
once a majority holds it durably, the leader among them or not. pysyncobj reads time and draws
randomness only inside :func:`raft.clock.bound`, with the clock and RNG this
core was given.

Proposals arriving together become one Raft entry (a *batch*: ``0x01 | u32
count | (u32 len | bytes)*``, prefixed by pysyncobj's command-type byte);
``apply`` unpacks it, calls the StateMachine once per proposal and the batch
callback resolves each proposal with its own result.

Proposal settling (``raft.core_settle``) and the read-only views (``raft.core_view``)
are mixins of ``RaftCore``, split out by concept.

pysyncobj itself is patched and subclassed in :mod:`raft.syncobj`
(:class:`TrijetSyncObj`): module hooks so it needs no poller, pipe or fork,
our apply and membership encoding, and the pysyncobj bug workarounds listed
there (:data:`PATCHES`, each of which the simulator's ``--stock`` mode can
turn off).  This module is what stays the same whichever SyncObj runs.
"""

from __future__ import annotations

import logging
import math
import random
import struct
from collections import deque
from collections.abc import Callable
from typing import Any

import cbor2
from pysyncobj.config import FAIL_REASON
from pysyncobj.node import Node

from raft import clock
from raft.config import RaftConfig
from raft.core_apply import StateMachineApply
from raft.core_fast import FULL_CYCLE_S, short_cycle
from raft.core_settle import ProposalSettling
from raft.core_view import CoreView
from raft.errors import (
    NoLeader,
    NotLeader,
    ProposalDropped,
    QueueFull,
    RaftError,
)
from raft.fsm import StateMachine
from raft.journal import DurableJournal
from raft.proposal import LeaderState, Proposal, encode_batch
from raft.quiet import QuietState
from raft.snapshot import SnapshotStore
from raft.storage import Disk, safe_file_stem
from raft.syncobj import (
    CMD_MEMBERSHIP,
    CMD_NO_OP,
    CMD_REGULAR,
    STATE_FOLLOWER,
    STATE_LEADER,
    TrijetSyncObj,
)
from raft.transport import OutboxTransport, message_size_estimate
from raft.wire import WireError, decode_messages, encode_messages

__all__ = ["RaftCore", "Ready", "safe_file_stem"]

log = logging.getLogger(__name__)

_U32 = struct.Struct(">I")


class Ready:
    """What one cycle produced; see the module docstring for the order of use."""

    __slots__ = ("completions", "core", "early_outbox", "leadership", "more", "outbox")

    def __init__(self, core: RaftCore) -> None:
        self.core = core
        #: a leader's append-entries: may leave before this cycle's fsync (Raft
        #: only requires persistence before *answering*; the leader processes the
        #: acks in a later cycle, after this cycle's records are durable)
        self.early_outbox: list[tuple[str, bytes]] = []
        #: everything else (responses, votes, forwarded commands): after the fsync
        self.outbox: list[tuple[str, bytes]] = []
        self.completions: list[tuple[Proposal, object, RaftError | None]] = []
        self.leadership: LeaderState | None = None
        self.more = False

    def sync(self) -> None:
        self.core.journal.flush()

    def apply(self) -> None:
        """Apply what the cycle committed (after ``cycle(defer_apply=True)``):
        its results join this Ready's completions."""
        core = self.core
        core._apply_committed()
        self.completions.extend(core._completions)
        core._completions = []
        # a new leader serves once its term's first entry is applied: maybe now
        last = core._last_leader
        if last is None or not last.is_leader:
            state = core.leader_state()
            if state is not last and state != last:
                core._last_leader = state
                self.leadership = state

    def release(self) -> None:
        for p, res, err in self.completions:
            p._finish(res, err)
        self.completions = []


# --------------------------------------------------------------------- the core


class RaftCore(StateMachineApply, ProposalSettling, CoreView):
    """One member of one Raft group, driven in cycles (see module docstring).

    Args:
        group_id: the group's name (never reused).
        node_id: this member's id (the links' node id).
        peers: the other members at creation (ignored in favour of the log and
            snapshot once they hold a configuration).
        fsm: a fresh StateMachine; rebuilt here from snapshot + journal.
        disk: where the journal ``<group>.journal`` and snapshot ``<group>.snap`` live.
        config: tuning.
        now: clock (seconds, monotonic) pysyncobj reads.
        rng: seeded RNG for election timeouts.
        first_candidate: the member of a new group that stands for election
            at once when fresh (term 0, empty log) rather than after a random
            election timeout; the other fresh members tell it when they start
            (a ``wake``), and while it is still a candidate with an empty log
            it sends them its vote request again (the first may have reached
            them before they started). So a new group has a leader in
            about a round trip. A timing choice only: Raft's safety never
            depends on it.
    """

    def __init__(
        self,
        group_id: str,
        node_id: str,
        peers: list[str],
        fsm: StateMachine,
        disk: Disk,
        config: RaftConfig | None = None,
        *,
        now: Callable[[], float],
        rng: random.Random,
        first_candidate: str | None = None,
    ) -> None:
        self.group_id = group_id
        self.node_id = node_id
        self._membership_requests: list[tuple[Proposal, str, str]] = []
        self._transfer_requests: list[tuple[Proposal, str | None]] = []
        #: while a leadership transfer is pending (until then, at most one election
        #: timeout after its last request), the leader appends no new entries (Raft thesis
        #: 3.10): otherwise its target, never exactly caught up under load, is refused the
        #: transfer or loses the vote for a shorter log, and the old leader stands again
        self._hold_until = 0.0
        #: the term the hold was asked in: a lead won back later holds nothing
        self._hold_term = -1
        self.config = config or RaftConfig()
        self.fsm = fsm
        self.now = now
        self.rng = rng
        stem = safe_file_stem(group_id)
        self.journal = DurableJournal(disk, stem + ".journal")
        self.journal.fsync_appends = self.config.journal_fsync
        self.snapshots = SnapshotStore(disk, stem + ".snap", fsm)
        self.transport = OutboxTransport(self.config.send_bytes_per_cycle_max)
        self._inbound: deque[tuple[str, list[dict[str, Any]]]] = deque()
        #: pysyncobj Node per peer id seen inbound (its messages are delivered as from it)
        self._nodes: dict[str, Node] = {}
        self._inbound_count = 0
        self._pending: deque[Proposal] = deque()
        self._barriers: list[Proposal] = []
        self._completions: list[tuple[Proposal, object, RaftError | None]] = []
        self._applied_results: list[object] | None = None
        self.removed = False
        self.dropped_inbound = 0
        self.bad_payloads = 0
        self.dropped_non_member = 0
        self.last_seen: dict[str, float] = {}
        self._last_leader: LeaderState | None = None
        #: set during a ``cycle(defer_apply=True)``: pysyncobj's tick leaves
        #: committed entries for :meth:`Ready.apply`
        self._defer_apply = False
        #: forwarded proposals waiting for the leader's answer: request id -> since
        self._forwarded_since: dict[int, float] = {}
        #: the term this member last became leader in (swept then)
        self._lead_term = -1
        #: since when waiting proposals sit beyond this follower's log end
        self._beyond_since: float | None = None
        #: snapshot installs already swept for proposals they skipped
        self._installs_swept = 0
        #: proposals resolved by the sweeps (``status()``)
        self.orphans_failed = 0
        #: forwarded proposals whose answer was lost: command -> (proposals,
        #: term then, leader it went to, give up at) (``_watch_applied``)
        self._watch: dict[bytes, list[Any]] = {}
        self.watch_resolved = 0
        #: set by the driver while the leader's own journal write is in flight:
        #: proposals wait for its end and then go as one entry (the batching a
        #: write's duration gives, which the write overlap would otherwise lose)
        self.hold_proposals = False
        #: a leader counts itself towards a majority only up to its durable
        #: index (False: the simulator's seeded bug)
        self.cap_own_unsynced = True
        #: leader ticks that committed entries its own journal write had not
        #: made durable yet (the followers were the majority)
        self.commits_before_own_write = 0
        #: elections brought forward because the leader's link closed
        self.leader_links_lost = 0
        #: a full cycle (with pysyncobj's tick) is due by then (``raft.core_fast``)
        self.full_cycle_due = 0.0
        #: short cycles (``raft.core_fast``): a leader's appends and commits, a follower's answers
        self.append_only_cycles = 0
        self.commit_only_cycles = 0
        self.answer_only_cycles = 0
        #: hibernation of an idle group (raft.quiet); ``heard`` is set by the driver
        self.quiet_state = QuietState(self)
        conf = self.config.syncobj_conf(self.journal, self.snapshots)
        with clock.bound(now, rng):
            self.obj = TrijetSyncObj(
                self,
                Node(node_id),
                [Node(p) for p in peers if p != node_id],
                conf,
                nodeClass=Node,
                transport=self.transport,
            )
            self.transport.syncobj = self.obj
            self.obj._SyncObj__needLoadDumpFile = False
            self.obj._SyncObj__loadDumpFile(clearJournal=False)
            self._replay_membership()
            self.transport.connect_initial(self.obj._SyncObj__otherNodes)
            # fresh: pysyncobj's log starts with one entry of term 0
            if first_candidate is not None and self.term == 0 and self.journal.last_index <= 1:
                if first_candidate == node_id:
                    self.obj._SyncObj__raftElectionDeadline = now() - 1.0
                elif any(n.id == first_candidate for n in self.obj._SyncObj__otherNodes):
                    hello = {"type": "wake", "term": 0}
                    self.transport.send(Node(first_candidate), hello)

    def _replay_membership(self) -> None:
        """Raft: a member uses the latest configuration in its log, committed or not."""
        obj = self.obj
        applied = obj._SyncObj__raftLastApplied
        for cmd, idx, _term in list(self.journal.entries()):
            if idx > applied and cmd[:1] == bytes((CMD_MEMBERSHIP,)):
                req = obj._SyncObj__parseChangeClusterRequest(cmd)
                if req is not None:
                    obj._SyncObj__doChangeCluster(req)

    # ------------------------------------------------------------ inputs

    def receive(self, peer_id: str, payload: bytes) -> None:
        """Buffer one inbound payload from ``peer_id`` (dropped if the buffer is full or invalid)."""
        if self._node(peer_id) not in self.obj._SyncObj__otherNodes:
            # not a member (removed, or not added yet): its vote requests would
            # bump the term and depose a healthy leader
            self.dropped_non_member += 1
            return
        try:
            msgs = decode_messages(payload)
        except WireError as e:
            self.bad_payloads += 1
            log.warning("event=bad_payload group=%s peer=%s error=%s", self.group_id, peer_id, e)
            return
        if self._inbound_count + len(msgs) > self.config.inbound_messages_max:
            self.dropped_inbound += len(msgs)
            return
        self._inbound.append((peer_id, msgs))
        self._inbound_count += len(msgs)
        self.last_seen[peer_id] = self.now()

    def _node(self, peer_id: str) -> Node:
        """pysyncobj's ``Node`` for ``peer_id`` (one object per peer, kept)."""
        node = self._nodes.get(peer_id)
        if node is None:
            node = self._nodes[peer_id] = Node(peer_id)
        return node

    @property
    def has_work(self) -> bool:
        return bool(self._inbound or self._pending or self._barriers or self.transport.outbox)

    def propose(self, data: bytes, *, leader_only: bool = False) -> Proposal:
        """Queue a proposal for the next cycle.

        ``leader_only``: if this member is not the leader when the proposal is
        submitted, it fails with ``NotLeader``/``NoLeader`` instead of being
        forwarded (publishes a stream captured as leader: the new leader may
        have captured the same message, and a forwarded copy would store it
        twice).

        Raises:
            QueueFull: ``proposals_pending_max`` reached.
            NotLeader / NoLeader: not leader and ``forward_proposals`` is off.
            ValueError: ``data`` larger than ``proposal_bytes_max``.
        """
        if len(data) > self.config.proposal_bytes_max:
            raise ValueError(f"proposal of {len(data)} bytes > {self.config.proposal_bytes_max}")
        if (leader_only or not self.config.forward_proposals) and not self.is_leader:
            lid = self.leader_id
            if lid is None:
                raise NoLeader("no leader known")
            raise NotLeader(lid)
        if len(self._pending) >= self.config.proposals_pending_max:
            raise QueueFull(f"{len(self._pending)} proposals pending")
        p = Proposal(data, leader_only)
        self._pending.append(p)
        self.quiet_state.wake()
        return p

    def barrier(self) -> Proposal:
        """A read barrier: resolved (result None) once an empty entry this
        member appended as leader is committed and applied here -- so every
        entry committed before the barrier was asked for is applied, and this
        member was the leader then (a deposed leader that does not know it yet
        cannot commit).  Fails with NotLeader/NoLeader if this member does not
        lead when the cycle submits it, with ProposalDropped if the entry is
        overwritten.  Barriers asked for in one cycle share one entry.  Like a
        proposal, a barrier waits out a leadership transfer's hold: entries
        appended meanwhile would keep the chosen successor from catching up
        (a stepdown under a stream of reads took an election timeout or two)."""
        p = Proposal(b"", leader_only=True)
        self._barriers.append(p)
        return p

    def _submit_barriers(self) -> None:
        waiting, self._barriers = self._barriers, []
        if not self.is_leader:
            lid = self.leader_id
            refused: RaftError = NoLeader("no leader known") if lid is None else NotLeader(lid)
            for p in waiting:
                self._completions.append((p, None, refused))
            return

        def cb(res: Any, err: int) -> None:
            error = None if err == FAIL_REASON.SUCCESS else self._map_error(err)
            for p in waiting:
                self._completions.append((p, None, error))

        self.obj._applyCommand(b"", cb, CMD_NO_OP)

    def change_membership(self, op: str, peer_id: str) -> Proposal:
        """Propose adding (``op='add'``) or removing (``'rem'``) a member; leader only."""
        if op not in ("add", "rem"):
            raise ValueError(op)
        p = Proposal(b"")
        self._membership_requests.append((p, op, peer_id))
        self.quiet_state.wake()
        return p

    def transfer_leadership(self, target: str | None = None) -> Proposal:
        """Ask pysyncobj to hand leadership to ``target`` (None: most caught-up follower)."""
        p = Proposal(b"")
        self._transfer_requests.append((p, target))
        self.quiet_state.wake()
        return p

    def peer_event(self, peer_id: str) -> bool:
        """The link to ``peer_id`` went down, came up or fell silent (raft.quiet):
        True if this member woke from hibernation (run a cycle)."""
        return self.quiet_state.peer_event(peer_id)

    @property
    def quiet(self) -> bool:
        """This member hibernates (raft.quiet): no timer of its own runs."""
        return self.quiet_state.quiet

    def farewell(self) -> list[tuple[str, bytes]]:
        """A leader closing down: a ``wake`` for each follower, encoded (raft.quiet)."""
        return [(n.id, encode_messages([m])) for n, m in self.quiet_state.farewell()]

    # ------------------------------------------------------------ the cycle

    def _callback(
        self, props: list[Proposal], cmd: bytes = b"", target: str | None = None
    ) -> Callable[[Any, int], None]:
        def cb(res: Any, err: int) -> None:
            if cmd and err in (FAIL_REASON.LEADER_CHANGED, FAIL_REASON.UNKNOWN_OUTCOME):
                # the answer was lost: find out from the log (``_settle_watches``)
                w = self._watch.setdefault(cmd, [props, None, target, 0.0])
                w[1], w[3] = self.term, self.now() + self.config.watch_s_max
                return
            if cmd and self._watch:
                self._watch.pop(cmd, None)
            if err == FAIL_REASON.SUCCESS:
                self._resolve(props, res)
                return
            error = self._map_error(err)
            for p in props:
                self._completions.append((p, None, error))

        return cb

    def _map_error(self, err: int) -> RaftError:
        if err == FAIL_REASON.QUEUE_FULL:
            return QueueFull("pysyncobj command queue full")
        if err == FAIL_REASON.MISSING_LEADER:
            return NoLeader("no leader known")
        if err == FAIL_REASON.NOT_LEADER:
            return NotLeader(self.leader_id)
        if err == FAIL_REASON.DISCARDED:
            return ProposalDropped("entry overwritten by a new leader", maybe_committed=False)
        if err == FAIL_REASON.REQUEST_DENIED:
            return ProposalDropped("request denied", maybe_committed=False)
        if err == FAIL_REASON.LEADER_CHANGED:
            return ProposalDropped("leader changed while forwarded", maybe_committed=True)
        return ProposalDropped(f"unknown outcome ({err})", maybe_committed=True)

    def _submit_pending(self) -> None:
        obj = self.obj
        if not self.is_leader and any(p.leader_only for p in self._pending):
            lid = self.leader_id
            refused: RaftError = NoLeader("no leader known") if lid is None else NotLeader(lid)
            for p in self._pending:
                if p.leader_only:
                    self._completions.append((p, None, refused))
            self._pending = deque(p for p in self._pending if not p.leader_only)
        cap_bytes = self.config.entry_bytes_max - 16
        cap_n = self.config.batch_proposals_max
        for _ in range(self.config.entries_per_cycle_max):
            if not self._pending:
                break
            batch: list[Proposal] = []
            size = 5
            while self._pending and len(batch) < cap_n:
                nxt = self._pending[0]
                if batch and size + 4 + len(nxt.data) > cap_bytes:
                    break
                batch.append(self._pending.popleft())
                size += 4 + len(nxt.data)
            cmd = encode_batch([p.data for p in batch])
            if self.is_leader:  # its own log: pysyncobj resolves it at apply
                obj._applyCommand(cmd, self._callback(batch, cmd), CMD_REGULAR)
                continue
            # forwarded (or refused for want of a leader): watched in the log
            # until its answer comes (``_settle_watches``)
            target = self.leader_id
            self._watch[cmd] = [batch, None, target, 0.0]
            obj._applyCommand(cmd, self._callback(batch, cmd, target), CMD_REGULAR)

    def _submit_admin(self) -> None:
        obj = self.obj
        for p, op, peer in self._membership_requests:
            cmd = cbor2.dumps([op, peer])

            def cb(res: Any, err: int, p: Proposal = p) -> None:
                self._completions.append(
                    (p, None, None if err == FAIL_REASON.SUCCESS else self._map_error(err))
                )

            if not self.is_leader:
                self._completions.append((p, None, NotLeader(self.leader_id)))
                continue
            obj._applyCommand(cmd, cb, CMD_MEMBERSHIP)
        self._membership_requests.clear()
        for p, target in self._transfer_requests:
            if self.is_leader:  # hold new entries: the target can catch up and win
                self._hold_until = self.now() + self.config.election_timeout_s_max
                self._hold_term = self.term

            def tcb(res: Any, err: int, p: Proposal = p) -> None:
                self._completions.append(
                    (p, None, None if err == FAIL_REASON.SUCCESS else self._map_error(err))
                )

            obj.transferLeadership(Node(target) if target else None, tcb)
        self._transfer_requests.clear()

    def cycle(self, *, defer_apply: bool = False) -> Ready:
        """Run one cycle: feed inbound, submit proposals, ``doTick(0)``.

        Args:
            defer_apply: leave the committed entries unapplied; the caller
                applies them with :meth:`Ready.apply` once it has sent the
                outbox (a follower's acknowledgement, a leader's next
                append-entries do not wait for the state machine).

        Returns:
            A :class:`Ready`; the caller must ``sync()`` it before sending its
            outbox, then (``apply()`` and) ``release()`` it.
        """
        short = short_cycle(self, defer_apply)
        if short is not None:
            return short
        obj = self.obj
        self._defer_apply = defer_apply
        self.full_cycle_due = self.now() + FULL_CYCLE_S
        with clock.bound(self.now, self.rng, self.now()):
            leading = obj._SyncObj__raftState == STATE_LEADER
            transport = self.transport
            if transport._over_budget:
                transport.reconnect_all()
            self._deliver_inbound()
            if self._membership_requests or self._transfer_requests:
                self._submit_admin()
            if leading and obj._SyncObj__raftState == STATE_FOLLOWER:
                self._follower_again()
            if self._pending and not self._holding() and not self.hold_proposals:
                self._submit_pending()
            if self._barriers and not self._holding():  # held like proposals
                self._submit_barriers()
            quiet = self.quiet_state
            quiet.before_tick()
            if obj._SyncObj__raftState != STATE_LEADER and not self.may_lead():
                # a replica with a hole never stands for election
                later = self.now() + self.config.election_timeout_s_max
                if obj._SyncObj__raftElectionDeadline < later:
                    obj._SyncObj__raftElectionDeadline = later
            leading = leading and obj._SyncObj__raftState == STATE_LEADER
            capped = self._cap_matches() if leading and self.cap_own_unsynced else None
            obj.doTick(0)
            if (
                obj._SyncObj__raftState == STATE_LEADER
                and obj._SyncObj__raftCommitIndex > self.journal.durable_index
            ):
                self.commits_before_own_write += 1
            if capped is not None:
                self._uncap_matches(capped)
            if leading and obj._SyncObj__raftState == STATE_FOLLOWER:
                self._follower_again()
            self._sweep_orphans()
            quiet.after_tick(busy=self.outstanding())
        ready = self._take_ready()
        state = self.leader_state()
        if state is not self._last_leader and state != self._last_leader:
            self._last_leader = state
            ready.leadership = state
        # A single-member group commits what it appended in the following tick.
        ready.more = bool(
            (self._pending and not self._holding() and not self.hold_proposals)
            or (self._barriers and not self._holding())
            or self._inbound
            or (
                self.is_leader
                and not obj._SyncObj__otherNodes
                and obj._SyncObj__raftCommitIndex < self.journal.last_index
            )
        )
        return ready

    def _deliver_inbound(self) -> None:
        """Hand the buffered messages of members to pysyncobj (inside ``clock.bound``)."""
        deliver = self.transport.deliver
        members = self.obj._SyncObj__otherNodes
        inbound, self._inbound = self._inbound, deque()
        self._inbound_count = 0
        for peer_id, msgs in inbound:
            node = self._node(peer_id)
            if node in members:
                for m in msgs:
                    deliver(node, m)

    def _take_ready(self) -> Ready:
        """The cycle's Ready: its outbox encoded, the completions so far."""
        self._defer_apply = False
        ready = Ready(self)
        ready.early_outbox, ready.outbox = self._encode_outbox()
        ready.completions, self._completions = self._completions, []
        return ready

    def _uncap_matches(self, capped: dict[Any, int]) -> None:
        """Put back the match indexes ``_cap_matches`` lowered for the commit step."""
        match = self.obj._SyncObj__raftMatchIndex
        for node, idx in capped.items():
            if node in match:
                match[node] = idx

    def _cap_matches(self) -> dict[Any, int] | None:
        """Make pysyncobj's commit step count this leader only up to its
        durable index; the match indexes to put back after the tick, or None.

        pysyncobj's leader commits index ``i`` when it and enough followers
        (match index >= ``i``) make a majority, counting itself for every entry
        it holds.  A driver that lets the leader's fsync run on while it goes
        on cycling (``raft.driver``) may hold entries only in memory: for
        those the leader must not count.  The rule is Raft's own (an entry is
        committed once a majority of members holds it durably; the leader is
        a member like any other, Raft allows it to write its log in parallel
        with replicating it): the commit index is the majority-th largest of
        ``[durable_index] + follower match indexes``, call it ``C``.  Lowering
        every follower's match index to ``min(match, C)`` for the tick makes
        pysyncobj compute exactly ``C`` (with its current-term check): at most
        ``C`` since above it only the leader counts; at least ``C`` since the
        members that hold ``C`` durably are a majority either way.  Nothing
        else in the tick reads match indexes; receiving (which raises them)
        happened before it.  A single-member group never gets here with
        entries that are not durable (its driver waits for its own fsync).
        """
        j = self.journal
        durable = j.durable_index
        if durable >= j.last_index:
            return None
        obj = self.obj
        others = obj._SyncObj__otherNodes
        match = obj._SyncObj__raftMatchIndex
        if not others:
            return None
        held = sorted([durable, *(match.get(n, 0) for n in others)], reverse=True)
        commit_max = held[(len(others) + 1) // 2]  # the majority-th largest
        saved: dict[Any, int] = {}
        for n in others:
            m = match.get(n, 0)
            if m > commit_max:
                saved[n] = m
                match[n] = commit_max
        return saved or None

    def _encode_outbox(self) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
        """(early, late): a leader's append-entries may go before the fsync."""
        early: list[tuple[str, bytes]] = []
        late: list[tuple[str, bytes]] = []
        outbox = self.transport.take_outbox()
        if not outbox:
            return early, late
        leader = self.is_leader and self.config.send_append_entries_before_fsync
        if len(outbox) == 1:
            # the usual cycle: one message to one peer (a leader's new entry to
            # its eager follower, a follower's answer): no sort, no chunking
            ((pid, msgs),) = outbox.items()
            if len(msgs) == 1:
                m = msgs[0]
                out = early if leader and m["type"] == "append_entries" else late
                out.append((pid, encode_messages(msgs)))
                return early, late
        limit = self.config.payload_bytes_max
        # sorted: pysyncobj iterates sets of nodes (hash order varies per process)
        for pid, msgs in sorted(outbox.items()):
            for out, group in (
                (early, [m for m in msgs if leader and m.get("type") == "append_entries"]),
                (late, [m for m in msgs if not (leader and m.get("type") == "append_entries")]),
            ):
                chunk: list[dict[str, Any]] = []
                size = 0
                for m in group:
                    s = message_size_estimate(m)
                    if chunk and size + s > limit:
                        out.append((pid, encode_messages(chunk)))
                        chunk, size = [], 0
                    chunk.append(m)
                    size += s
                if chunk:
                    out.append((pid, encode_messages(chunk)))
        return early, late

    def outstanding(self) -> bool:
        """Work of this member that its own timers look after (proposals,
        barriers, forwarded proposals awaiting an answer or watched for in the
        log): while there is any, it does not hibernate (raft.quiet)."""
        return bool(
            self._pending
            or self._barriers
            or self._forwarded_since
            or self._watch
            or self.obj._SyncObj__commandsWaitingReply
            or self.obj._SyncObj__commandsWaitingCommit
        )

    def next_deadline(self) -> float:
        """Clock time at which the next cycle is due if nothing arrives.

        pysyncobj compares ``now > deadline`` strictly, so we wake a hair later.
        """
        obj = self.obj
        if self.quiet_state.quiet:
            return math.inf
        if obj._SyncObj__raftState == STATE_LEADER:
            due = float(obj._SyncObj__newAppendEntriesTime)
            if (self._pending or self._barriers) and self._holding():
                due = min(due, self._hold_until)  # held proposals go when the hold ends
            return due + 1e-6
        return float(obj._SyncObj__raftElectionDeadline) + 1e-6

    def leader_link_down(self, peer_id: str) -> bool:
        """The link to ``peer_id`` closed.  If it is this follower's leader,
        the election deadline is brought forward to within a third of the
        minimum election timeout (random, against split votes): a leader whose
        process died closes its links at once, so its group need not wait out
        an election timeout long enough to ride out event-loop pauses.  True
        if the deadline moved."""
        obj = self.obj
        if obj._SyncObj__raftState == STATE_LEADER or self.leader_id != peer_id:
            return False
        if not self.may_lead():
            return False
        soon = self.now() + self.rng.uniform(0.0, self.config.election_timeout_s_min / 3)
        if obj._SyncObj__raftElectionDeadline <= soon:
            return False
        obj._SyncObj__raftElectionDeadline = soon
        self.leader_links_lost += 1
        return True

    def force_log_compaction(self) -> None:
        self.obj.forceLogCompaction()

    def _holding(self) -> bool:
        """Does a pending leadership transfer hold new entries back now?  (Not
        once the lead is won back in a later term: the transfer is over.)"""
        return (
            self._hold_term == self.obj._SyncObj__raftCurrentTerm
            and self.is_leader
            and self.now() < self._hold_until
        )

    @property
    def transferring(self) -> bool:
        """This member leads and holds new entries for a transfer it asked for."""
        return self._holding()

    @property
    def handing_over(self) -> bool:
        """A leadership transfer this member asked for as leader is recent (within
        its hold): true from the request until the hold ends, leader or not."""
        return self.now() < self._hold_until

    def _follower_again(self) -> None:
        """This cycle ended the lead (pysyncobj's leader fallback, or a higher term seen):
        start a whole election timeout from now, as Raft restarts a follower's timer.  The
        deadline a leader kept is long past, so it would stand again at its next tick, and
        the outgoing leader of a transfer would race (and often beat) its chosen target."""
        obj = self.obj
        later = self.now() + self.config.election_timeout_s_max  # as step_down_now
        if obj._SyncObj__raftElectionDeadline < later:
            obj._SyncObj__raftElectionDeadline = later

    def step_down_now(self) -> LeaderState | None:
        """Stop leading at once, as pysyncobj's own leader fallback does (its
        journal cannot be written); the new state, or None if not leading."""
        obj = self.obj
        if obj._SyncObj__raftState != STATE_LEADER:
            return None
        with clock.bound(self.now, self.rng):
            obj._SyncObj__setState(STATE_FOLLOWER)
            obj._SyncObj__raftLeader = None
            obj._SyncObj__raftElectionDeadline = self.now() + self.config.election_timeout_s_max
        state = self.leader_state()
        self._last_leader = state
        return state

    def fail_all(self, error: RaftError) -> None:
        """Fail every queued proposal (group closing)."""
        while self._pending:
            self._pending.popleft()._finish(None, error)
        while self._barriers:
            self._barriers.pop()._finish(None, error)
