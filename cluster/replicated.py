"""A replicated stream's group: its ops through a Raft group of two or three servers.

Theory of operation
-------------------
``ReplicatedGroup`` stands where ``LocalGroup`` stands for an R1 stream and
offers the same ``propose`` (and ``start``, which does not wait and calls
back, so the stream keeps several entries in flight): the op is encoded (``cluster.ops``), replicated
by a ``raft.RaftGroup`` among the stream's peers (named by server name, the
group by its meta assignment, ``S-R3F-…``) and applied on every replica to its
own store by ``ReplicatedStreamFSM``.  ``propose`` returns once the entry is
committed — durable in the journals of a majority — and applied on this
server, so a PubAck sent after it means "on a majority".  Only the leader
proposes publishes (the node captures a replicated stream's subjects on its
leader only); a proposal made on a follower is forwarded by the group.

The store is a durable state machine of its own: replaying the journal into
it after a restart would append twice.  ``ReplicatedStreamFSM.apply_at``
learns each entry's Raft index; the *applied mark* ``(index, last_seq, msgs)`` is
written (write-fsync-rename, ``raft/applied.json`` in the stream's directory)
after the store has been synced up to that point, at most every
``MARK_INTERVAL_S``; the store's buffers are flushed in the trio thread,
where the Raft driver applies (one owner: a flush racing an append in a
worker thread would lose the record), and fsynced in a worker thread on a
descriptor of its own (``_sync_store``).  At start the store is cut back to the mark's
``last_seq`` (the tail the crash left beyond the mark is applied again from
the journal, never twice) and entries up to the mark's index are skipped.
A store that holds less than the mark says, or reports damage, or lost a
message past the mark that a cut cannot bring back (``restore_to_mark``),
and a mark that cannot be read, are rebuilt: the store is emptied and every
entry applies again (from the journal, then from the leader).
Compaction (file stores): when the journal holds more than
``JOURNAL_ENTRIES_MAX`` entries or ``JOURNAL_BYTES_MAX`` bytes, the mark loop
asks the group for a snapshot; ``ReplicatedStreamFSM.snapshot`` syncs the
store (in the trio thread, between two applies) and returns the stream's
*state* (``cluster.stream_snapshot``: bounds, deletes, dedupe window, every
consumer's state), never its messages; the driver writes it in its sync
thread and the journal is cut behind it.  The snapshot carries a valid
applied mark, so a restart never cuts the store back to a mark whose entries
are gone.  A memory store keeps the whole journal (after a restart of every
replica, the journal is the only copy of its messages).

Catch-up: a replica that installs a snapshot (from the leader, or its own
at start) while its store lacks messages the snapshot covers has a *hole*:
it applies nothing (``can_apply``), never stands for election or takes a
transferred lead (``can_lead``), answers no direct get, and fetches the
missing messages from the leader's store in bounded batches
(``cluster.catchup``), then writes its mark and resumes from the journal.
A brand-new empty peer takes the same path: it catches up by itself.

Bootstrap (an R1 stream scaled up, ``write_bootstrap``): the group is
born on the server that holds the stream's store, with that server alone as
member, and the store *is* its first state.  ``raft/bootstrap.cbor`` (written
before the group first runs) carries the R1 consumers' configs and states and
says so: the group writes an applied mark at the store's state (index 0:
nothing to skip, nothing to cut), installs the consumers into its table, and
once it leads takes a snapshot (its journal is cut behind it), so that a
member added later installs the snapshot and fetches the messages through
catch-up instead of replaying a journal that never held them; then the file
goes and ``bootstrapped`` is set (members are added only after that).  A
restart before then does it all again from the file.

Consumer entries (``cluster.consumer_table``) ride in the same log and are
applied to the stream's ``ConsumerTable`` on every replica, *always*: the
table is memory only and is rebuilt at start from the whole journal, so the
applied mark does not skip them.

Leadership: ``leader_listeners`` hear ``True``/``False`` as this replica gains
or loses the lead (capture, expiry and answers follow it).

Cancellation: a cancelled ``propose`` may still commit and apply on every
replica; its result is dropped (retries use ``Nats-Msg-Id``).

The state machine (``ReplicatedStreamFSM``, batched apply of entry runs) and
the applied mark's functions live in ``cluster.replicated_fsm`` (re-exported).
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from cluster import catchup
from cluster.group_bootstrap import read_bootstrap, unlink_bootstrap
from cluster.ops import ConsumerRemove, encode_op
from cluster.replica_spec import (  # re-exported
    JOURNAL_BYTES_MAX,
    JOURNAL_ENTRIES_MAX,
    ReplicaSpec,  # noqa: F401
)
from cluster.replicated_fsm import (  # the state machine and its mark (re-exported)
    MARK_FILE,
    RUN_BYTES_MAX,  # noqa: F401
    ReplicatedStreamFSM,
    read_mark,  # noqa: F401
    restore_to_mark,
    snapshot_mark,
    write_mark,
)
from cluster.stream_fsm import StreamStateMachine
from cluster.stream_snapshot import GroupSnapshot
from raft.config import RaftConfig
from raft.errors import ApplyFailed, RaftError
from raft.group import RaftGroup
from raft.links import PeerLinks
from raft.proposal import Proposal
from raft.storage import OsDisk
from store.api import StreamStore

log = logging.getLogger(__name__)

#: how often the applied mark moves (store synced, then the mark written)
MARK_INTERVAL_S = 0.2
#: an idle stream group hibernates after this long (raft.quiet)
QUIET_AFTER_S = 0.5
#: entries applied before the bootstrap snapshot (see ``_bootstrap``)
BOOTSTRAP_APPLIED_MIN = 3
#: a consumer name no consumer has (``$`` is not allowed in names): a no-op entry
BOOTSTRAP_NOOP = "$bootstrap"
#: how often a bootstrapping group looks whether it leads / its snapshot is taken
BOOTSTRAP_POLL_S = 0.05
#: a stream group's Raft entries: one batch of publishes (its bytes bounded by the stream)
ENTRY_BYTES_MAX = 4 * 1024 * 1024
#: followers learn a commit index with the next entries, or this much later
#: (one message, wake-up and cycle less per follower and entry)
COMMIT_NOTIFY_S_MAX = 0.02
#: a new entry goes at once to the followers a majority needs (one of two),
#: the other at most this much later, batched (``raft.syncobj``)
LAZY_FOLLOWER_S = 0.02
#: a stream group's election timeout range (the leader steps down after the
#: minimum without answers from a majority).  Raft's default 0.3-0.6 s is
#: shorter than the event-loop pauses of a loaded two-core machine (a garbage
#: collection, an fsync, the process not scheduled: 0.1-0.5 s measured with
#: TRIJET_STALL_MS under the KV bench at load 16), which deposed healthy
#: leaders every few seconds.  A leader that dies closes its links, and its
#: followers then stand at once (``RaftCore.leader_link_down``), so failover
#: after a crash does not wait for this.
ELECTION_TIMEOUT_S = (0.6, 1.2)
#: pysyncobj's own compaction triggers are off: the mark loop decides
NO_COMPACTION = 2**62
#: a catch-up request unanswered this long is asked again
CATCHUP_TIMEOUT_S = 2.0
#: no leader to ask: look again this much later
CATCHUP_RETRY_S = 0.1


class ReplicatedGroup:
    """``LocalGroup``'s interface over a Raft group of the stream's peers.

    Args:
        group_id: the Raft group name (the meta assignment's).
        node_id: this server's name.
        peers: every member's server name (this one included).
        fsm: the stream's state machine.
        store: its store.
        links: the server's peer links.
        raft_dir: where the journal and the applied mark live.
        rng: seeds election timeouts.
        durable_store: False for a memory store (no mark: it starts empty).
        first_candidate: a new group's first placed peer (stands at once).
        fsync_in_thread: the journal's fsync in the driver's sync thread (False:
            inline, for deterministic tests under a mock clock).
        journal_fsync: False for the user's ``sync_interval`` (interval mode):
            the journal's appends are written, not fsynced, and ``sync`` (the
            stream's interval task) fsyncs them, as nats-server does by default.
    """

    idle = False  # no inline batches: every batch goes through the stream's task
    #: compaction bounds (instances may lower them: tests)
    journal_entries_max = JOURNAL_ENTRIES_MAX
    journal_bytes_max = JOURNAL_BYTES_MAX

    def __init__(
        self,
        group_id: str,
        node_id: str,
        peers: list[str],
        fsm: StreamStateMachine,
        store: StreamStore,
        links: PeerLinks,
        raft_dir: Path,
        rng: random.Random,
        *,
        durable_store: bool = True,
        first_candidate: str | None = None,
        fsync_in_thread: bool = True,
        journal_fsync: bool = True,
    ) -> None:
        #: True: durability is the journal's, fsynced before a member answers
        #: (a majority); False: interval mode, ``sync`` runs on the interval
        self.sync_each_batch = journal_fsync
        self.group_id = group_id
        self.node_id = node_id
        self.store = store
        self.raft_dir = raft_dir
        #: a memory store starts empty: the whole journal applies again
        self.durable_store = durable_store
        #: set once the group may take members (see Bootstrap in the module doc)
        self.bootstrapped = trio.Event()
        boot = read_bootstrap(raft_dir)
        if boot is None:
            self.bootstrapped.set()
        elif durable_store and not (raft_dir / MARK_FILE).exists():
            st = store.state()  # the R1 store is the group's first state
            write_mark(raft_dir, 0, st.last_seq, st.msgs)
        # applied past the mark before a crash: those entries apply again (the
        # stream rebuilds its dedupe table from the store afterwards)
        index = (
            restore_to_mark(store, raft_dir, group_id, snapshot_mark(raft_dir, group_id))
            if durable_store
            else 0
        )
        self.rfsm = ReplicatedStreamFSM(fsm, index)
        if boot:  # before the journal replays the consumers' ops on top
            self.rfsm.consumers.install(list(boot))
        self.rfsm.before_snapshot = store.sync
        self._marked = index
        self.links = links
        self._hole = trio.Event()
        self.rfsm.on_hole = self._hole.set
        self.rfsm.on_damaged = self._on_damaged
        self._nursery: trio.Nursery | None = None
        self._replies_send, self._replies = trio.open_memory_channel[bytes](4)
        self._serve_send, self._serve = trio.open_memory_channel[tuple[str, bytes]](8)
        self._req_id = 0
        #: catch-up counters (``status()["catchup"]``)
        self.catchup_batches = 0
        self.catchup_msgs = 0
        self.catchups_done = 0
        self.served_batches = 0
        self.compactions_asked = 0
        config = RaftConfig(
            election_timeout_s_min=ELECTION_TIMEOUT_S[0],
            election_timeout_s_max=ELECTION_TIMEOUT_S[1],
            commit_notify_s_max=COMMIT_NOTIFY_S_MAX,
            lazy_follower_s=LAZY_FOLLOWER_S,
            entry_bytes_max=ENTRY_BYTES_MAX,
            log_compaction_entries_min=NO_COMPACTION,
            log_compaction_s_min=float(NO_COMPACTION),
            quiet_after_s=QUIET_AFTER_S,
            journal_fsync=journal_fsync,
        )
        self.raft = RaftGroup(
            group_id,
            node_id,
            [p for p in peers if p != node_id],
            self.rfsm,
            links,
            OsDisk(raft_dir, preallocate=True),
            config,
            rng=rng,
            # a new group: its first placed peer stands at once (the stream's
            # create is answered once it has a leader); never on a reopen
            first_candidate=first_candidate,
            fsync_in_thread=fsync_in_thread,  # False: deterministic tests (mock clock)
        )
        self.leader_listeners: list[Callable[[bool], None]] = []
        self.leader_since_ns = 0
        self._was_leader = False
        #: trio time of the last change of ``_was_leader`` (None: never led)
        self._lead_changed_at: float | None = None
        #: trio time the group's leader (as this replica knows it) last changed
        self.leader_changed_at: float | None = None
        self._last_leader_id: str | None = None
        #: set once ``leader_listeners`` heard this replica gain the lead
        self.lead_announced = trio.Event()

    @property
    def is_leader(self) -> bool:
        return self.raft.is_leader

    @property
    def leader_id(self) -> str | None:
        return self.raft.leader_id

    @property
    def transferring(self) -> bool:
        """This replica leads but is handing the lead over (``RaftGroup.transferring``)."""
        return self.raft.transferring

    def lost_lead_at(self, now: float) -> float | None:
        """When this replica last stopped leading (``now`` if it just did and
        the leadership watch has not caught up), None if it leads or never led."""
        if self.raft.is_leader:
            return None
        if self._was_leader:
            return now
        return self._lead_changed_at

    def gained_lead_lately(self, now: float, within: float) -> bool:
        """Whether this replica leads and gained the lead within ``within`` s
        (or just now: the leadership watch has not caught up)."""
        if not self.raft.is_leader:
            return False
        if not self._was_leader:
            return True
        at = self._lead_changed_at
        return at is not None and now - at <= within

    @property
    def current(self) -> bool:
        """False while this replica's store has a hole or its journal writes fail
        (it falls behind): it answers no reads then."""
        return self.rfsm.current and not self.raft.write_failing

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        ch = catchup.channel(self.group_id)
        self.links.register(ch, self._on_catchup_frame)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.raft.run)
                nursery.start_soon(self._watch_leadership)
                nursery.start_soon(self._mark_loop)
                nursery.start_soon(self._catchup_loop)
                nursery.start_soon(self._serve_loop)
                if not self.bootstrapped.is_set():
                    nursery.start_soon(self._bootstrap)
                task_status.started()
        finally:
            self.links.unregister(ch)

    async def _bootstrap(self) -> None:
        """Born from an R1 store: once leading, snapshot the store's state so
        members added later get it (never a journal without its messages)."""
        while True:
            st = self.raft.status()
            if st.get("first_index", 0) > 1:  # the journal is cut behind a snapshot
                break
            if self.is_leader and self.rfsm.current:
                try:
                    if st.get("applied", 0) < BOOTSTRAP_APPLIED_MIN:
                        # pysyncobj keeps the entry before the last applied one: the
                        # journal is cut past index 1 only with three entries applied
                        await self.raft.propose(encode_op(ConsumerRemove(BOOTSTRAP_NOOP)))
                        continue
                    self.raft.force_log_compaction()
                except RaftError:
                    pass
            await trio.sleep(BOOTSTRAP_POLL_S)
        await trio.to_thread.run_sync(unlink_bootstrap, self.raft_dir)
        log.info("event=stream_group_bootstrapped group=%s node=%s", self.group_id, self.node_id)
        self.bootstrapped.set()

    def _on_damaged(self) -> None:
        """The store failed under an apply: a leader hands the lead over."""
        if self._nursery is not None and self.is_leader:
            self._nursery.start_soon(self.step_down)

    # -- catch-up (cluster.catchup) ------------------------------------------------

    def _on_catchup_frame(self, peer_id: str, payload: bytes) -> None:
        """From the links (synchronous): a request to serve or an answer."""
        kind, body = payload[:1], payload[1:]
        try:
            if kind == b"Q" and self.rfsm.current:
                self._serve_send.send_nowait((peer_id, body))
            elif kind == b"A":
                self._replies_send.send_nowait(body)
        except trio.WouldBlock:
            pass  # the requester asks again after its timeout

    async def _serve_loop(self) -> None:
        """Answer catch-up requests from this replica's store, one bounded batch each."""
        ch = catchup.channel(self.group_id)
        async for peer, body in self._serve:
            try:
                rid, a, b = catchup.decode_request(body)
            except ValueError as exc:
                log.warning(
                    "event=catchup_bad_request group=%s peer=%s reason=%s", self.group_id, peer, exc
                )
                continue
            if not self.rfsm.current:
                continue
            through, msgs = catchup.serve_batch(self.store, a, b)
            self.links.send(peer, ch, b"A" + catchup.encode_reply(rid, through, msgs))
            self.served_batches += 1
            await trio.lowlevel.checkpoint()

    async def _catchup_loop(self) -> None:
        while True:
            await self._hole.wait()
            self._hole = trio.Event()
            self.rfsm.on_hole = self._hole.set
            target = self.rfsm.target
            if target is not None:
                await self._fill(target)

    async def _fill(self, snap: GroupSnapshot) -> None:
        """Fetch ``(store's last_seq, snap.last_seq]`` from the leader, batch by
        batch, then mark and let entries apply again.

        The next batch is asked for as soon as an answer arrives, before that
        answer is written: the leader reads the next batch while this replica
        writes the last one (at most one request outstanding, two batches in
        memory).
        """
        t0 = trio.current_time()
        n0 = self.catchup_msgs
        pending: int | None = None  # the outstanding request's id
        while self.rfsm.target is snap:  # a newer install replaces it: the loop goes on
            have = self.store.state().last_seq
            if have >= snap.last_seq:
                break
            if pending is None:
                pending = self._ask(have + 1, snap.last_seq)
                if pending is None:
                    await trio.sleep(CATCHUP_RETRY_S)  # no leader to ask
                    continue
            reply = await self._reply(pending)
            pending = None
            if reply is None:
                continue  # lost or unanswered: asked again
            through, msgs = reply
            if through < have + 1 and not msgs:
                await trio.sleep(CATCHUP_RETRY_S)  # the leader has not applied that far yet
                continue
            if through < snap.last_seq:
                pending = self._ask(through + 1, snap.last_seq)  # overlaps the write below
            catchup.install_batch(self.store, through, msgs)
            self.catchup_batches += 1
            self.catchup_msgs += len(msgs)
            await trio.lowlevel.checkpoint()
        if self.rfsm.target is not snap:
            return  # a newer snapshot was installed meanwhile: its hole comes next
        # the fsync in a worker thread (the records are handed to the OS here):
        # a hundred thousand messages are megabytes to make durable
        await self._sync_store()
        if self.rfsm.target is not snap:
            return
        st = self.store.state()
        if self.durable_store:
            await trio.to_thread.run_sync(
                write_mark, self.raft_dir, snap.index, st.last_seq, st.msgs
            )
        if self.rfsm.target is not snap:
            return
        self._marked = snap.index
        self.rfsm.filled()
        self.catchups_done += 1
        log.info(
            "event=catchup_done group=%s node=%s index=%d last_seq=%d msgs=%d secs=%.3f",
            self.group_id,
            self.node_id,
            snap.index,
            st.last_seq,
            self.catchup_msgs - n0,
            trio.current_time() - t0,
        )
        self.raft.kick()

    def _ask(self, from_seq: int, to_seq: int) -> int | None:
        """Send a catch-up request to the leader; its id (None: no leader to ask)."""
        leader = self.raft.leader_id
        if leader is None or leader == self.node_id:
            return None
        self._req_id += 1
        body = b"Q" + catchup.encode_request(self._req_id, from_seq, to_seq)
        self.links.send(leader, catchup.channel(self.group_id), body)
        return self._req_id

    async def _reply(self, rid: int) -> tuple[int, list[Any]] | None:
        """The answer to request ``rid`` (``(through, msgs)``), None after the timeout."""
        with trio.move_on_after(CATCHUP_TIMEOUT_S):
            while True:
                body = await self._replies.receive()
                try:
                    got, through, msgs = catchup.decode_reply(body)
                except ValueError as exc:
                    log.warning("event=catchup_bad_reply group=%s reason=%s", self.group_id, exc)
                    continue
                if got == rid:
                    return through, msgs
        return None

    async def propose(self, op: Any) -> Any:
        """Replicate ``op``; its ``ApplyOutcome`` once committed and applied here.

        Raises:
            RaftError: not committed (NotLeader, NoLeader, ProposalDropped …).
            ApplyFailed: the state machine raised.
        """
        result = await self.raft.propose(encode_op(op))
        if isinstance(result, ApplyFailed):
            raise result
        return result

    def start(
        self,
        op: Any,
        on_done: Callable[[Any, BaseException | None], None],
        *,
        leader_only: bool = False,
        kick: bool = True,
    ) -> None:
        """Replicate ``op`` without waiting: ``on_done(outcome, error)`` is called
        from the group's driver once it is committed and applied here (the
        point where ``propose`` returns), or with the ``RaftError`` /
        ``ApplyFailed`` that ends it.  ``on_done`` must not block.
        ``leader_only``: never forwarded to the leader (``RaftCore.propose``).
        ``kick``: see ``RaftGroup.start``.

        Raises:
            RaftError: refused at once (QueueFull, NotLeader, NoLeader);
                ``on_done`` is then never called.
            ValueError: the encoded op is larger than an entry.
        """

        def done(p: Proposal) -> None:
            if p.error is not None:
                on_done(None, p.error)
            elif isinstance(p.result, ApplyFailed):
                on_done(None, p.result)
            else:
                on_done(p.result, None)

        self.raft.start(encode_op(op), done, leader_only=leader_only, kick=kick)

    @property
    def members(self) -> list[str]:
        """Every member's server name (this one included)."""
        return sorted(set(self.raft.members) | {self.node_id})

    async def step_down(self, target: str | None = None) -> None:
        """Hand the lead over (to ``target`` if given); failures are logged.

        Cancellation: a transfer already requested may still happen.
        """
        try:
            await self.raft.step_down(target=target)
        except RaftError as exc:
            log.warning("event=stepdown_failed group=%s reason=%r", self.group_id, exc)

    async def sync(self) -> None:
        """Interval mode: fsync the journal's appends written so far (the
        store is synced by the mark loop).  Nothing to do otherwise: the
        journal is fsynced every cycle."""
        if not self.sync_each_batch:
            await self.raft.sync_journal()

    async def _watch_leadership(self) -> None:
        import time

        channel = self.raft.subscribe_leadership()
        async with channel:
            async for state in channel:
                if state.leader_id != self._last_leader_id:
                    self._last_leader_id = state.leader_id
                    self.leader_changed_at = trio.current_time()
                lead = state.is_leader
                if lead != self._was_leader:
                    self._was_leader = lead
                    self._lead_changed_at = trio.current_time()
                    if lead:
                        self.leader_since_ns = time.time_ns()
                    for listener in list(self.leader_listeners):
                        listener(lead)
                    if lead:
                        self.lead_announced.set()
                    elif self.lead_announced.is_set():
                        self.lead_announced = trio.Event()

    async def _mark_loop(self) -> None:
        """Sync the store, then move the applied mark (bounded, periodic).

        The store's buffers are flushed on the trio thread, between two
        applies of the group's driver (never concurrently with one); its
        fsync and the mark file's write run in worker threads.
        """
        while True:
            await trio.sleep(MARK_INTERVAL_S)
            # nothing applied since the last mark: wait for the group's next
            # cycle rather than a timer (a hibernating group has none)
            while self.rfsm.applied == self._marked:
                await self.raft.wait_cycle()
            index = self.rfsm.applied
            if not self.durable_store:
                self._marked = index
                self._maybe_compact()
                continue
            if not self.rfsm.current:
                continue
            if index == self._marked:
                self._maybe_compact()
                continue
            st = self.store.state()
            # the flush in the store's owner thread: the Raft driver appends to the
            # store in this one, and a flush in a worker thread racing an append
            # loses that record (the write buffer is swapped under it); only the
            # fsync, of a descriptor of its own, runs in a worker
            try:
                await self._sync_store()
                if not self.sync_each_batch:
                    # interval mode: the mark never passes the journal's fsynced
                    # end -- a power loss that cut the journal's tail must not
                    # leave a store whose mark skips the entries that come again
                    await self.raft.sync_journal()
                await trio.to_thread.run_sync(
                    write_mark, self.raft_dir, index, st.last_seq, st.msgs
                )
            except OSError as exc:  # ENOSPC …: the mark stays; tried again next time
                log.error("event=mark_write_failed group=%s error=%r", self.group_id, exc)
                continue
            self._marked = index
            self._maybe_compact()

    async def _sync_store(self) -> None:
        """Make the store durable up to now.  The buffered records are handed
        to the OS here, in the store's owner thread; the fsync -- hundreds of
        milliseconds on a busy disk, which held the event loop and with it
        the group's heartbeats -- runs in a worker thread on a descriptor of
        its own, while the driver goes on appending."""
        flush = getattr(self.store, "flush_for_sync", None)
        if flush is None:
            self.store.sync()
            return
        fd = flush()
        if fd is None:
            return
        try:
            await trio.to_thread.run_sync(os.fsync, fd)
        finally:
            os.close(fd)

    def _maybe_compact(self) -> None:
        """Ask for a snapshot when the journal passed its bounds (file stores)."""
        st = self.raft.status()
        entries, nbytes = st.get("journal_entries", 0), st.get("journal_bytes", 0)
        if entries > self.journal_entries_max or nbytes > self.journal_bytes_max:
            if st.get("applied", 0) - st.get("first_index", 0) >= 2:
                try:
                    self.raft.force_log_compaction()
                except RaftError:  # the group is closing (cancelled with its owner)
                    return
                self.compactions_asked += 1

    def status(self) -> dict[str, Any]:
        st = self.raft.status()
        st["catchup"] = {
            "current": self.rfsm.current,
            "installs": self.rfsm.installs,
            "batches": self.catchup_batches,
            "msgs": self.catchup_msgs,
            "done": self.catchups_done,
            "served_batches": self.served_batches,
        }
        return st
