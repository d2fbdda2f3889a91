"""The trio task that owns one group member's RaftCore (and so its SyncObj).

Theory of operation
-------------------
One driver task per group member (DESIGN rule 3). It sleeps until something
happens — a frame from the links, a proposal, an admin request — or until
pysyncobj's next timer (election deadline for followers/candidates, next
heartbeat for a leader), then runs one cycle:

1. ``core.cycle(defer_apply=True)``: feed inbound messages, submit batched
   proposals, ``doTick(0)``, leaving newly committed entries unapplied.
   Synchronous, no I/O except a snapshot write.
2. Group commit: the journal's records from this cycle are appended and
   fsynced once (in the driver's own :class:`~raft.syncer.SyncThread` if
   ``fsync_in_thread``, a hand-over several times cheaper than
   ``trio.to_thread``; the driver awaits it, nothing else touches the core
   meanwhile). A failed write (ENOSPC, EIO) is cut back by the journal and
   retried with the same records, with a growing pause (``WRITE_RETRY_S_*``),
   until it succeeds: nothing of that cycle but a leader's append-entries
   leaves the node meanwhile (no vote, no acknowledgement, no apply), and the
   member resumes by itself when space returns.
   A leader's append-entries (``ready.early_outbox``) are sent before the
   fsync, overlapping the follower's disk write with ours: Raft requires
   persistence before answering, not before replicating.
   With ``RaftConfig.leader_write_overlap`` (off by default: on a loaded
   two-core machine it measured no faster, the extra cycles and the hand-off
   of each write cost what the earlier commits saved; ``bench/README.md``) a
   leader does not even wait for its own write (*write overlap*): when its cycle has nothing but
   append-entries to send (no vote, no answer, no forwarded command's
   reply) and no snapshot to write, the write runs on in the background and
   the driver goes on cycling -- taking the followers' acknowledgements,
   committing, applying, releasing PubAcks.  One new entry may be appended
   (and sent) while the write is in flight; its records wait behind it, and
   further proposals wait for the write's end (``RaftCore.hold_proposals``)
   and then go as one entry, as they pile up during a waited-for fsync:
   without that a leader cycling on every acknowledgement would cut the load
   into many small entries, each an append-entries and a fsync on every
   follower.  Writes go one at a time, in order; the end of one kicks a cycle
   if records or proposals wait for it or its entries are not all committed.  Any other cycle first waits for the write in flight and
   then writes its own records, as before.  Why that keeps every promise:

   * An entry is committed once a *majority of members holds it durably*;
     the leader is a member like the others (Raft lets it write its log in
     parallel with replicating it).  ``RaftCore`` counts the leader only up
     to its journal's ``durable_index`` (``RaftCore._cap_matches``), so with
     R3 the two followers' fsynced copies commit an entry while the leader's
     fsync is still in flight, and one follower's copy plus the leader's
     unsynced one never do.
   * A PubAck promises "durable on a majority" (DESIGN §4): it is released
     only after commit, so it holds whatever becomes of the leader.  A leader
     that crashes before its fsync restarts without those entries (or with a
     torn tail the replay cuts); they are committed, so every future leader
     has them and sends them back, and a member whose log lacks them cannot
     win an election against the majority that holds them.
   * The leader may apply a committed entry before its own copy is durable:
     its state machine then holds only committed entries, and a restarted
     stream store ahead of its journal skips what it re-receives (the applied
     mark, ``cluster.replicated``).
   * Nothing the leader *answers* leaves before its own records are durable:
     votes, append-entries responses and forwarded commands' replies wait for
     the write in flight and the cycle's own (the sequential path), so a
     member never promises what its disk might not have.  A single-member
     group never overlaps (it is its own majority).
3. Send the outbox through the :class:`~raft.links.PeerLinks` (non-blocking;
   full per-peer queues drop, Raft retries).
4. Apply the committed entries (``ready.apply()``), then release finished
   proposals and publish leadership changes. Applying after the sends means
   a follower's acknowledgement and a leader's next append-entries never wait
   for the state machine (applying a batch of a thousand stream messages
   takes milliseconds); a result is still released only after its entry is
   committed, durable and applied.

The fast lane (``RaftConfig.fast_lane``, on by default): a frame that reaches
a *parked* driver (waiting for a wake-up, no cycle of its own in progress, no
write in flight) is handled at once by the link reader's task that delivered
it (``_fast_cycle``): the same four steps in the same order, with the
cycle's journal write done right there when it is small
(``inline_write_bytes_max``: a sync publish's lone entry; the sync thread's
hand-over and the GIL passed back and forth cost more than the fsync blocks
the event loop; after one slower than ``INLINE_WRITE_SLOW_S`` the thread
takes them again for ``INLINE_OFF_S``).  A follower's append-entries are answered, and a leader's
acknowledgements committed, applied and released (the PubAcks written),
before the reader reads on: one task hop less on each side of a replicated
write.  A larger write (under async load), a compaction's rewrite, a failed
write or a snapshot to write is left to the driver (``_stash``), which goes on
from that step; until then it is not parked, so the lane is never reentered
and writes stay in order.  Proposals take the lane too (``proposed``: a
stream's publishes, started together at the end of a routed batch): the new
entry is appended and its append-entries sent in the proposer's task; the
leader's own write of it is done there only when it needs no fsync (interval
mode), else by the driver in its sync thread while the event loop reads the
followers' answers.  Traced with ``bench/r3_trace.py`` (``raft.trace``).

A cycle the timer asked for (a follower's election deadline, a leader's
heartbeat and majority check) first lets the link readers deliver what already
arrived (``_let_links_deliver``): after an event-loop pause the silence it
would act on is often only unread bytes.  A follower whose leader's link closes
stands for election at once (``RaftCore.leader_link_down``).

Proposals that pile up while a cycle's fsync runs are batched into the next
cycle's entry, so batching grows with load by itself. No fixed tick: an idle
follower only wakes for heartbeats (each heartbeat is a message) or its
election deadline; and a group with nothing to do hibernates (``quiet_after_s``,
:mod:`raft.quiet`) over links that report link events (``watch``): then
nothing of it runs until a message, a proposal or a link event wakes it.

Interval mode (``RaftConfig.journal_fsync`` off: the user's ``sync_interval``;
:mod:`raft.journal`): a cycle's records that need no fsync and are small are
written on the event loop, with no hand-off to the sync thread; term/vote
records and rewrites still go through it, fsynced.  :meth:`sync_journal` asks
the driver to fsync what was written since (the stream calls it every
interval), in order with the cycles' writes; a member that stops fsyncs its
journal on the way out.

Snapshots (log compaction) are captured inside the cycle but written by the
driver in its sync thread after the journal's fsync (``SnapshotStore.take_write``),
and the journal's rewrite after compaction is the next cycle's "fsync" (a
whole-file replace): neither blocks the event loop.

The driver never holds the core across an ``await`` other than the fsync and
the snapshot write (a background write only reads the bytes it was handed;
the journal records its success with ``written()`` back in the trio thread).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from raft import trace
from raft.core import RaftCore, Ready
from raft.links import PeerLinks
from raft.proposal import LeaderState
from raft.syncer import SyncThread

__all__ = ["RaftDriver"]

log = logging.getLogger(__name__)

#: a failed journal write is retried after this pause, doubling up to the max
WRITE_RETRY_S_MIN = 0.05
WRITE_RETRY_S_MAX = 1.0
#: a fast cycle's own journal write slower than this (the disk is busy) ...
INLINE_WRITE_SLOW_S = 0.02
#: ... leaves the fast cycles' writes to the driver's sync thread this long
INLINE_OFF_S = 0.1


class RaftDriver:
    """Runs ``core`` over ``links`` until cancelled.

    Args:
        core: the member's core (built inside trio, with ``now=trio.current_time``).
        links: peer links shared by all groups of this node.
        fsync_in_thread: run the per-cycle fsync in a worker thread.
        on_leadership: called (synchronously) with each new :class:`LeaderState`.
    """

    def __init__(
        self,
        core: RaftCore,
        links: PeerLinks,
        *,
        fsync_in_thread: bool = True,
        on_leadership: Callable[[LeaderState], None] | None = None,
    ) -> None:
        self.core = core
        self.links = links
        self.fsync_in_thread = fsync_in_thread
        self.on_leadership = on_leadership
        self._wake = trio.Event()
        self._kicked = True
        self._cycle_done = trio.Event()
        self.cycles = 0
        #: True while a journal write keeps failing (this member falls behind)
        self.write_failing = False
        #: timer cycles before which the links delivered frames (see ``_let_links_deliver``)
        self.deliveries_before_timer = 0
        #: set when the leader's journal write in flight ends (None: none in flight)
        self._in_flight: trio.Event | None = None
        #: peers heard from since the write in flight started
        self._heard_in_flight: set[str] = set()
        #: leader cycles that went on while the member's own write was in flight
        self.overlapped_cycles = 0
        #: leader writes the driver did not wait for
        self.background_writes = 0
        #: interval mode: set once the journal fsync asked for is done
        self._sync_asked: trio.Event | None = None
        #: interval mode: cycle writes made on the event loop
        self.inline_writes = 0
        #: the driver waits for a wake-up (no cycle of its own in progress), and until when
        self._parked = False
        self._parked_until = 0.0
        #: a cycle run in a link reader's task (``_fast_cycle``) whose write or
        #: snapshot the driver finishes: (ready, records to write or None)
        self._stash: tuple[Ready, bytes | None] | None = None
        #: a fast cycle brought the deadline forward: the parked driver re-arms its timer
        self._rearm = False
        #: cycles run in a link reader's task, start to end
        self.fast_cycles = 0
        #: after a slow write in a fast cycle, its writes go to the driver until then
        self._inline_off_until = 0.0
        self._fast_lane = core.config.fast_lane and not core.config.leader_write_overlap

    def kick(self) -> None:
        """Ask for a cycle as soon as possible (non-blocking; safe from any task)."""
        self._kicked = True
        self._wake.set()

    def _on_peer_event(self, peer_id: str) -> None:
        if self.core.peer_event(peer_id):
            self._kicked = True
            self._wake.set()

    def _on_frame(self, peer_id: str, payload: bytes) -> None:
        core = self.core
        if trace.ON:
            trace.stamp("frame", core.group_id, core.journal.last_index, core.commit_index)
        core.receive(peer_id, payload)
        if self._in_flight is not None:
            # the leader's own write is in flight: a cycle now helps only once
            # enough followers answered to commit without it; the rest waits
            # for the write's end (one cycle for all, as without the overlap)
            heard = self._heard_in_flight
            heard.add(peer_id)
            if len(heard) < core.majority:
                return
        if (
            self._parked
            and self._fast_lane
            and not self._kicked
            and self._in_flight is None
            and core.replicating_only()
        ):
            try:
                self._fast_cycle()
            except Exception:  # as the driver's own cycle would: never into the link
                self._fast_lane = False
                log.exception("event=fast_cycle_raised group=%s", core.group_id)
                self.kick()
            return
        self._kicked = True
        self._wake.set()

    def proposed(self) -> None:
        """A proposal (or barrier) was queued: a parked leader's driver runs
        its cycle at once, in the caller's task (the fast lane), so the new
        entry's append-entries leave without the hop to the driver's task.
        The leader's own write of it is done there only when it is cheap
        (interval mode: no fsync); otherwise the driver writes it in its sync
        thread (``_stash``), as it would have.  Any other state: a kick.
        Callers must be outside the router's delivery loops (a stream's
        ``drain``, from ``Router.flush``): the cycle may release proposals."""
        core = self.core
        if (
            self._parked
            and self._fast_lane
            and not self._kicked
            and self._in_flight is None
            and core.is_leader
            and not core.quiet
        ):
            try:
                self._fast_cycle(own_entry=True)
            except Exception:  # as the driver's own cycle would: never into the caller
                self._fast_lane = False
                log.exception("event=fast_cycle_raised group=%s", core.group_id)
                self.kick()
            return
        self.kick()

    def _fast_cycle(self, *, own_entry: bool = False) -> None:
        """Run a cycle at once, in the link reader's task that delivered a frame,
        while the driver is parked (the fast lane).

        A follower's append-entries and a leader's acknowledgements are then
        handled without the hop to the driver's task: the cycle, a small
        journal write done here (``inline_write_bytes_max``), the answers sent,
        the committed entries applied and their proposals released, all before
        the reader reads on.  In the same order as the driver's cycle, so the
        same promises hold (nothing but a leader's append-entries leaves before
        the cycle's records are durable).  A larger write, a compaction's
        rewrite or a snapshot to write is left to the driver (``_stash``),
        which goes on from there.  Never reentered: the driver is not parked
        while a cycle runs (this one included).
        """
        core = self.core
        self._parked = False
        try:
            ready = self._cycle_begin()
            journal = core.journal
            data = None
            if journal.dirty:
                data = journal.take_pending()
                now = trio.current_time()
                cheap = journal.cheap(data)  # interval mode: no fsync
                if journal.rewriting or (
                    not cheap
                    and (
                        own_entry
                        or len(data) > core.config.inline_write_bytes_max
                        or now < self._inline_off_until
                    )
                ):
                    self._stash = (ready, data)
                    return
                if cheap:
                    self.inline_writes += 1
                try:
                    journal.write_pending(data)
                except OSError:  # cut back by the journal: the driver retries
                    self._stash = (ready, data)
                    return
                finally:
                    if trio.current_time() - now > INLINE_WRITE_SLOW_S:
                        # a slow disk: no more writes on the event loop for a while
                        self._inline_off_until = trio.current_time() + INLINE_OFF_S
                journal.written()
                self.write_failing = False
            if core.snapshots.pending_write is not None:
                self._stash = (ready, None)
                return
            self._send_outbox(ready)
            self._cycle_tail(ready)
            self.fast_cycles += 1
        finally:
            if self._stash is not None or self._kicked:
                self._wake.set()
            elif core.next_deadline() < self._parked_until:
                self._rearm = True  # the driver's timer must be set earlier
                self._wake.set()
            else:
                self._parked = True

    def _on_peer_down(self, peer_id: str) -> None:
        """The link to ``peer_id`` closed: if it led, stand for election soon."""
        if self.core.leader_link_down(peer_id):
            self.kick()

    async def sync_journal(self) -> None:
        """Interval mode: fsync the journal's appends written so far (returns
        at once when there are none).  Done by the driver between cycles, in
        its sync thread; a failed fsync is logged and retried at the next call."""
        if not self.core.journal.unsynced:
            return
        if self._sync_asked is None:
            self._sync_asked = trio.Event()
        asked = self._sync_asked
        self.kick()
        await asked.wait()

    async def _sync_appended(self, syncer: SyncThread | None) -> None:
        asked, self._sync_asked = self._sync_asked, None
        journal = self.core.journal
        try:
            if journal.unsynced:
                if syncer is not None:
                    await syncer.run(journal.sync_appended)
                else:
                    journal.sync_appended()
        except OSError as exc:
            log.warning("event=journal_sync_failed group=%s error=%r", self.core.group_id, exc)
        finally:
            if asked is not None:
                asked.set()

    async def wait_cycle(self) -> None:
        """Wait until the next cycle has completed."""
        await self._cycle_done.wait()

    async def _let_links_deliver(self) -> None:
        """Before a cycle the timer asked for: let the link readers hand over
        what already arrived.

        A timer cycle decides on silence -- a follower's election deadline, a
        leader's check that a majority answered within ``leaderFallbackTimeout``.
        After the event loop was held (a long task step, a garbage collection,
        the process not scheduled on a loaded machine) the timer and the
        sockets' data become ready together, and in the same batch of tasks
        the driver could run first and act on a silence that is only unread
        bytes: a follower stood for election while the leader's heartbeat sat
        in its socket, a leader stepped down while its followers' answers did.
        Two scheduling rounds let every reader with data run first (the poll
        for I/O happens between rounds); ``deliveries_before_timer`` counts
        how often that delivered something.
        """
        for _ in range(2):
            await trio.lowlevel.checkpoint()
        if self._kicked:
            self.deliveries_before_timer += 1

    async def _write_journal(self, syncer: SyncThread | None, data: bytes) -> None:
        """Append + fsync this cycle's records; retried until it succeeds.

        Cancellation: the records of a write that never succeeded are lost
        with the member (nothing depending on them was sent).
        """
        journal = self.core.journal
        pause = WRITE_RETRY_S_MIN
        failed_at = None
        while True:
            try:
                if syncer is not None:
                    await syncer.run(journal.write_pending, data)
                else:
                    journal.write_pending(data)
            except OSError as exc:
                self.write_failing = True
                if failed_at is None:
                    failed_at = trio.current_time()
                    # a leader that cannot write stops leading at once and says so:
                    # its node releases the stream's capture, so publishes go to
                    # the leader the others elect instead of waiting here
                    state = self.core.step_down_now()
                    if state is not None and self.on_leadership is not None:
                        self.on_leadership(state)
                    log.error(
                        "event=journal_write_failed group=%s error=%r retry=until_written",
                        self.core.group_id,
                        exc,
                    )
                await trio.sleep(pause)
                pause = min(pause * 2, WRITE_RETRY_S_MAX)
                continue
            journal.written()
            self.write_failing = False
            if failed_at is not None:
                log.warning(
                    "event=journal_write_resumed group=%s after_s=%.3f",
                    self.core.group_id,
                    trio.current_time() - failed_at,
                )
            return

    async def _write_cycle_records(self, syncer: SyncThread | None, data: bytes) -> None:
        """Write a cycle's records: on the event loop when they are cheap
        (interval mode, small: no fsync), else in the sync thread."""
        if self.core.journal.cheap(data):
            self.inline_writes += 1
            await self._write_journal(None, data)
        else:
            await self._write_journal(syncer, data)

    async def _write_in_background(self, syncer: SyncThread | None, data: bytes) -> None:
        """A leader's journal write that the driver does not wait for: already
        handed to the sync thread (``submit``, so the fsync starts within the
        cycle), or, without one, written when this task first runs."""
        done = self._in_flight
        try:
            if syncer is not None:
                try:
                    await syncer.wait()
                except OSError:  # cut back by the journal: written again, as below
                    await self._write_journal(syncer, data)
                else:
                    self.core.journal.written()
                    self.write_failing = False
            else:
                await self._write_journal(syncer, data)
        finally:
            self._in_flight = None
            self.core.hold_proposals = False
            if done is not None:
                done.set()
            core = self.core
            if core.journal.dirty or core.has_work or core.commit_index < core.journal.last_index:
                self.kick()  # records or proposals wait for it, or a commit may count it

    async def _settle_writes(self) -> None:
        """Wait for the write in flight (if any): what follows may depend on it."""
        while self._in_flight is not None:
            await self._in_flight.wait()

    def _may_overlap(self, ready: Ready) -> bool:
        """May this cycle leave its records to a write the driver does not wait for?

        Only a leader's cycle with nothing but append-entries to send (no vote,
        no answer, no forwarded command's reply: those may only leave once
        everything before them is durable), in a group with other members (a
        majority without this member), and no snapshot to write.  See the
        module docstring.
        """
        core = self.core
        return (
            core.config.leader_write_overlap
            and not ready.outbox
            and core.is_leader
            and core.has_peers
            and core.snapshots.pending_write is None
        )

    async def _write_snapshot(self, syncer: SyncThread | None, name: str, blob: bytes) -> None:
        store = self.core.snapshots
        try:
            if syncer is not None:
                await syncer.run(store.write_blob, name, blob)
            else:
                store.write_blob(name, blob)
        except OSError as exc:  # the journal stays whole: compaction waits for the next try
            log.warning("event=snapshot_write_failed group=%s error=%r", self.core.group_id, exc)
            store.write_done(False)
        else:
            store.write_done(True)
        self._kicked = True

    def _cycle_begin(self) -> Ready:
        """A cycle's first step: ``core.cycle``, then a leader's append-entries sent."""
        core = self.core
        # one entry may join a write in flight (its append-entries go at
        # once); more proposals wait for the write's end (see above)
        core.hold_proposals = self._in_flight is not None and core.journal.dirty
        t0 = trace.now() if trace.ON else 0
        ready = core.cycle(defer_apply=True)
        gid = core.group_id
        if trace.ON:
            trace.stamp("cstart", gid, core.journal.last_index, core.commit_index, t0)
            trace.stamp("cend", gid, core.journal.last_index, core.commit_index)
        send = self.links.send
        for peer, payload in ready.early_outbox:
            send(peer, gid, payload)  # a leader's append-entries
        if trace.ON:
            trace.stamp("early", gid, core.journal.last_index, core.commit_index)
        return ready

    def _send_outbox(self, ready: Ready) -> None:
        """After the cycle's records are durable: its answers, votes, replies."""
        core = self.core
        gid = core.group_id
        if trace.ON:
            trace.stamp("synced", gid, core.journal.last_index, core.commit_index)
        send = self.links.send
        for peer, payload in ready.outbox:
            send(peer, gid, payload)
        if trace.ON:
            trace.stamp("sent", gid, core.journal.last_index, core.commit_index)

    async def _cycle_end(self, ready: Ready, syncer: SyncThread | None) -> None:
        """A cycle's last steps once its records are written (or in flight)."""
        self._send_outbox(ready)
        snap = self.core.snapshots.take_write()
        if snap is not None:
            await self._write_snapshot(syncer, *snap)
        self._cycle_tail(ready)
        if self._sync_asked is not None and self._in_flight is None:
            await self._sync_appended(syncer)

    def _cycle_tail(self, ready: Ready) -> None:
        """Apply, release, publish the leadership; count the cycle."""
        core = self.core
        ready.apply()
        if trace.ON:
            trace.stamp("applied", core.group_id, core.journal.last_index, core.commit_index)
        ready.release()
        if trace.ON:
            trace.stamp("released", core.group_id, core.journal.last_index, core.commit_index)
        if ready.leadership is not None and self.on_leadership is not None:
            self.on_leadership(ready.leadership)
        if ready.more:
            self._kicked = True
        self.cycles += 1
        done, self._cycle_done = self._cycle_done, trio.Event()
        done.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Drive the core until cancelled.

        Cancellation: stops between cycles or during the fsync wait (the fsync
        itself completes); the outbox of an interrupted cycle is not sent.
        """
        core = self.core
        gid = core.group_id
        self.links.register(gid, self._on_frame)
        watch = getattr(self.links, "on_peer_down", None)
        unwatch = watch(self._on_peer_down) if watch is not None else None
        watch_events = getattr(self.links, "watch", None)
        quiet = core.quiet_state
        if watch_events is not None and core.config.quiet_after_s is not None:
            watch_events(gid, self._on_peer_event)
            quiet.heard = getattr(self.links, "last_heard", None)
        else:
            quiet.available = False  # no link events: never hibernate
        syncer = SyncThread(f"raft-sync-{gid}") if self.fsync_in_thread else None
        if syncer is not None or core.config.leader_write_overlap:
            # written by the driver, in order with the journal's appends
            core.snapshots.defer_writes = True
            core.journal.defer_rewrite = True
        try:
            async with trio.open_nursery() as nursery:
                task_status.started()
                while True:
                    stash, self._stash = self._stash, None
                    if stash is not None:  # a fast cycle left its write or snapshot to us
                        ready, data = stash
                        self._wake = trio.Event()  # a kick meanwhile: ``_kicked`` says so
                        if data is not None:
                            await self._write_cycle_records(syncer, data)
                        await self._cycle_end(ready, syncer)
                        if self._kicked:
                            await trio.lowlevel.checkpoint()
                        continue
                    if not self._kicked:
                        # never spin: a timer that pysyncobj did not advance waits 0.5 ms
                        deadline = max(core.next_deadline(), trio.current_time() + 0.0005)
                        self._parked_until = deadline
                        self._parked = True
                        try:
                            with trio.move_on_at(deadline) as timer:
                                await self._wake.wait()
                        finally:
                            self._parked = False
                        if self._stash is not None:
                            continue
                        rearm, self._rearm = self._rearm, False
                        if not self._kicked and (
                            (rearm and not timer.cancelled_caught)
                            or (
                                timer.cancelled_caught
                                and core.next_deadline() > trio.current_time()
                            )
                        ):
                            # fast cycles moved the deadline: park again, no cycle
                            self._wake = trio.Event()
                            continue
                        if timer.cancelled_caught:
                            await self._let_links_deliver()
                            if self._stash is not None:
                                continue
                    self._wake = trio.Event()
                    self._kicked = False
                    ready = self._cycle_begin()
                    journal = core.journal
                    if self._may_overlap(ready):
                        if self._in_flight is not None:
                            self.overlapped_cycles += 1
                        elif journal.dirty:
                            self._in_flight = trio.Event()
                            self._heard_in_flight.clear()
                            self.background_writes += 1
                            data = journal.take_pending()
                            if syncer is not None:
                                syncer.submit(journal.write_pending, data)
                            nursery.start_soon(self._write_in_background, syncer, data)
                        # else: this cycle's records wait for the write in flight; its
                        # end kicks the cycle that writes them
                    else:
                        await self._settle_writes()
                        if journal.dirty:
                            await self._write_cycle_records(syncer, journal.take_pending())
                    await self._cycle_end(ready, syncer)
                    if self._kicked:
                        # the next cycle follows at once: let the other tasks run
                        # first (otherwise the wait for the next wake-up is the
                        # checkpoint; one scheduler round less per cycle)
                        await trio.lowlevel.checkpoint()
        finally:
            if core.journal.unsynced:
                try:
                    core.journal.sync_appended()  # a member that stops leaves its journal durable
                except OSError as exc:
                    log.warning("event=journal_sync_failed group=%s error=%r", gid, exc)
            if quiet.available:
                for peer, payload in core.farewell():  # followers elect anew
                    self.links.send(peer, gid, payload)
            self.links.unregister(gid)
            if unwatch is not None:
                unwatch()
            if syncer is not None:
                syncer.close()
