"""pysyncobj, tamed: module hooks and the ``SyncObj`` subclass :class:`raft.core.RaftCore` owns.

Theory of operation
-------------------
pysyncobj is written to own threads, a poller, a pipe notifier, a journal file
and pickle. Importing this module points its module-level factories at ours,
once (:func:`_install_hooks`): a journal object passed in is used as is (our
:class:`~raft.journal.DurableJournal`), poller type ``"trijet-none"`` gets a
poller that never polls and a notifier that never notifies, a serializer
whose hook belongs to a :class:`~raft.snapshot.SnapshotStore` becomes a
:class:`~raft.snapshot.ChunkedSerializer`, and the clock and RNG go through
:mod:`raft.clock`. Anything else still gets pysyncobj's own.

:class:`TrijetSyncObj` overrides pysyncobj's private (name-mangled
``_SyncObj__*``) methods. It knows its :class:`~raft.core.RaftCore` only for
the config (which patches are on), the journal, the snapshot store and two
callbacks: ``_apply_batch`` for regular commands and
``_on_membership_applied``.

Membership commands are CBOR (``['add'|'rem', node_id]``), not pickled Node
objects; VERSION commands are ignored; regular commands never go through
pickle.

pysyncobj bugs worked around (each can be disabled for the simulator's
``--stock`` mode, see :data:`PATCHES`); all in :class:`TrijetSyncObj` except
``fallback`` (:meth:`raft.config.RaftConfig.syncobj_conf`) and the term stamp of
``response_term`` (:mod:`raft.transport`, carried by :mod:`raft.wire`):

* ``ae_truncate``: a follower truncates its log after ``prevLogIdx`` on *every*
  append-entries, even a stale/duplicated one whose entries it already has,
  losing entries it acknowledged; and it then sets its commit index to
  ``min(leaderCommit, lastLogIndex)``. We only truncate on a real conflict
  (Raft §5.3) and cap the commit index at the last entry the message verified.
* ``vote_dedupe``: a candidate counts every ``response_vote`` of its term, so a
  duplicated vote counts twice. We count each voter once per term.
* ``response_term``: ``next_node_idx`` carries no term, so a response from an
  earlier term can raise a leader's match index. We stamp and check the term.
* ``snapshot_keep``: installing a snapshot clears the whole journal even when
  the follower's log already extends past it (a stale install after a
  duplicated reset) and at start-up a snapshot newer than the journal's first
  entries wipes entries after it. We keep entries that follow a matching
  snapshot base and report a match index no higher than the snapshot.
* ``fallback``: ``leaderFallbackTimeout`` defaults to 30 s; we set it to the
  minimum election timeout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import cbor2
import pysyncobj.syncobj as _so
from pysyncobj.journal import Journal
from pysyncobj.node import Node

from raft import clock
from raft.journal import DurableJournal
from raft.snapshot import ChunkedSerializer, SnapshotStore

if TYPE_CHECKING:
    from raft.core import RaftCore

__all__ = [
    "CMD_MEMBERSHIP",
    "CMD_NO_OP",
    "CMD_REGULAR",
    "PATCHES",
    "STATE_CANDIDATE",
    "STATE_FOLLOWER",
    "STATE_LEADER",
    "TrijetSyncObj",
]

#: Workarounds for pysyncobj bugs (see the module docstring); all on by default.
PATCHES = frozenset({"ae_truncate", "vote_dedupe", "response_term", "snapshot_keep", "fallback"})

# pysyncobj's command-type byte (first byte of every command) and raft states.
CMD_REGULAR = 0
CMD_NO_OP = 1
CMD_MEMBERSHIP = 2
STATE_FOLLOWER, STATE_CANDIDATE, STATE_LEADER = 0, 1, 2
_REGULAR = bytes([CMD_REGULAR])


# --------------------------------------------------------------------- hooks


class _NullPoller:
    def subscribe(self, *a: Any, **k: Any) -> None:
        return None

    def unsubscribe(self, *a: Any, **k: Any) -> None:
        return None

    def poll(self, timeout: float) -> None:
        return None


class _NullNotifier:
    def __init__(self, *a: Any, **k: Any) -> None:
        return None

    def notify(self) -> None:
        return None


_orig_create_journal = _so.createJournal
_orig_create_poller = _so.createPoller
_orig_serializer = _so.Serializer
_orig_pipe_notifier = getattr(_so, "PipeNotifier", None)


def _create_journal(journal_file: Any) -> Any:
    if isinstance(journal_file, Journal):
        return journal_file
    return _orig_create_journal(journal_file)


def _create_poller(poller_type: Any) -> Any:
    if poller_type == "trijet-none":
        return _NullPoller()
    return _orig_create_poller(poller_type)


def _make_serializer(file_name: Any, batch: Any, use_fork: Any, ser: Any, de: Any, chk: Any) -> Any:
    store = getattr(ser, "__self__", None)
    if isinstance(store, SnapshotStore):
        return ChunkedSerializer(store, batch)
    return _orig_serializer(file_name, batch, use_fork, ser, de, chk)


def _make_pipe_notifier(poller: Any, *a: Any) -> Any:
    if isinstance(poller, _NullPoller) or _orig_pipe_notifier is None:
        return _NullNotifier()
    return _orig_pipe_notifier(poller, *a)


def _node_hash(self: Node) -> int:
    return hash(self._id)


def _node_eq(self: Node, other: object) -> bool:
    return isinstance(other, Node) and self._id == other._id


def _install_hooks() -> None:
    clock.install()
    # pysyncobj hashes and compares its Node through the ``id`` property,
    # a score of times per cycle (sets and dicts of members): read the field
    Node.__hash__ = _node_hash  # type: ignore[method-assign]
    Node.__eq__ = _node_eq  # type: ignore[method-assign, assignment]
    _so.createJournal = _create_journal
    _so.createPoller = _create_poller
    _so.Serializer = _make_serializer
    _so.PipeNotifier = _make_pipe_notifier
    _so.PIPE_NOTIFIER_ENABLED = True


_install_hooks()


# --------------------------------------------------------------------- SyncObj subclass


class TrijetSyncObj(_so.SyncObj):  # type: ignore[misc]
    """SyncObj with trijet's apply, membership encoding and bug workarounds."""

    def __init__(self, core: RaftCore, *args: Any, **kwargs: Any) -> None:
        self._trijet = core
        self._votes: tuple[int, set[str]] = (-1, set())
        self._snap_next: int | None = None
        self._snap_base: int | None = None
        #: set while new entries are appended (``_checkCommandsToApply``)
        self._appending = False
        #: the followers a new entry goes to at once (``lazy_follower_s``)
        self._eager: list[Node] = []
        self._eager_set: set[Node] = set()
        #: new entries sent to the eager followers only (``status()``)
        self.eager_sends = 0
        super().__init__(*args, **kwargs)

    # -- commands

    def _SyncObj__parseChangeClusterRequest(self, command: bytes) -> list[str] | None:
        if not command or command[0] != CMD_MEMBERSHIP:
            return None
        try:
            req = cbor2.loads(command[1:])
        except Exception:
            return None
        if (
            isinstance(req, list)
            and len(req) == 2
            and req[0] in ("add", "rem")
            and type(req[1]) is str
        ):
            return req
        return None

    def _SyncObj__doApplyCommand(self, command: bytes) -> object:
        kind = command[0] if command else -1
        if kind == CMD_MEMBERSHIP:
            req = self._SyncObj__parseChangeClusterRequest(command)
            if req is not None:
                self._SyncObj__doChangeCluster(req)
                self._trijet._on_membership_applied(req)
            return None
        if kind != CMD_REGULAR:
            return None
        return self._trijet._apply_batch(command[1:])

    # -- inbound messages

    def _SyncObj__onMessageReceived(self, node: Node, message: dict[str, Any]) -> None:
        if self._trijet.quiet_state.on_message(node, message):
            return  # raft.quiet's own messages
        patches = self._trijet.config.patches
        t = message["type"]
        if t == "append_entries":
            if "ae_truncate" in patches and "prevLogIdx" in message:
                if self._ae_rewrite(node, message):
                    return
            elif "snapshot_keep" in patches and "serialized" in message:
                self._snapshot_message(node, message)
                return
        elif t == "timeout_now" and not self._trijet.may_lead():
            return  # a replica with a hole never takes a transferred lead
        elif t == "response_vote" and "vote_dedupe" in patches:
            term, voters = self._votes
            if term != self.raftCurrentTerm:
                voters = set()
                self._votes = (self.raftCurrentTerm, voters)
            if node.id in voters:
                return
            voters.add(node.id)
        elif t == "next_node_idx" and "response_term" in patches:
            mt = message.get("term")
            if mt is not None and mt != self.raftCurrentTerm:
                return
        _so.SyncObj._SyncObj__onMessageReceived(self, node, message)

    def _ae_rewrite(self, node: Node, m: dict[str, Any]) -> bool:
        """Raft §5.3 append-entries on top of pysyncobj. True if fully handled here."""
        if m["term"] < self.raftCurrentTerm:
            return False
        j: DurableJournal = self._trijet.journal
        prev, prev_term = m["prevLogIdx"], m["prevLogTerm"]
        entries = m["entries"]
        i = 0
        while i < len(entries) and j.term_at(entries[i][1]) == entries[i][2]:
            i += 1
        if i:
            prev, prev_term = entries[i - 1][1], entries[i - 1][2]
            entries = entries[i:]
        if entries or j.last_index <= (prev or 0) or j.term_at(prev) != prev_term:
            if i:
                m = dict(m, prevLogIdx=prev, prevLogTerm=prev_term, entries=entries)
            _so.SyncObj._SyncObj__onMessageReceived(self, node, m)
            return True
        # Everything in the message is already in our log and our log goes further:
        # pysyncobj would truncate after prev. Handle term/leader/timer through it with
        # an entry-less message, cap the commit index at what the message verified.
        hb = {
            "type": "append_entries",
            "term": m["term"],
            "commit_index": min(m["commit_index"], prev),
        }
        _so.SyncObj._SyncObj__onMessageReceived(self, node, hb)
        self._SyncObj__sendNextNodeIdx(node, nextNodeIdx=prev + 1, success=True)
        return True

    def _snapshot_message(self, node: Node, m: dict[str, Any]) -> None:
        if m["term"] < self.raftCurrentTerm:
            return
        before = self._SyncObj__raftCommitIndex
        self._snap_next = None
        self._snap_base = None
        _so.SyncObj._SyncObj__onMessageReceived(self, node, m)
        base = self._snap_base
        if base is not None:
            # pysyncobj set commit = min(leaderCommit, lastLogIndex); entries after the
            # snapshot base that we kept are not verified by this message.
            commit = max(before, min(m["commit_index"], base))
            commit = max(commit, self._SyncObj__raftLastApplied)
            self._SyncObj__raftCommitIndex = commit
            self._trijet.journal.setRaftCommitIndex(commit)

    # -- apply and commit notification

    def _pysyncobj_apply(self) -> bool:
        """pysyncobj's apply step: every committed entry; True if any.

        With a state machine that applies runs (``apply_run``, see
        :mod:`raft.fsm`) each run of consecutive regular entries goes to it
        in one call (``RaftCore._apply_run``); then, entry by entry in log
        order, the proposers' callbacks and ``raftLastApplied`` as
        pysyncobj's own loop does them.  Other entries (membership, no-op)
        apply one at a time through ``__doApplyCommand``.
        """
        core = self._trijet
        if getattr(core.fsm, "apply_run", None) is None:
            return bool(_so.SyncObj._SyncObj__applyLogEntries(self))
        applied = self._SyncObj__raftLastApplied
        count = self._SyncObj__raftCommitIndex - applied
        if count <= 0:
            return False
        entries = self._SyncObj__getEntries(applied + 1, count)
        waiting = self._SyncObj__commandsWaitingCommit
        i, n = 0, len(entries)
        while i < n:
            j = i
            while j < n and entries[j][0][:1] == _REGULAR:
                j += 1
            if j > i:
                run = entries[i:j]
                results = core._apply_run([(e[0][1:], e[1]) for e in run])
                i = j
            else:
                run = entries[i : i + 1]
                results = [self._SyncObj__doApplyCommand(run[0][0])]
                i += 1
            for entry, res in zip(run, results, strict=True):
                for term, callback in waiting.pop(entry[1], []):
                    if term == entry[2]:
                        callback(res, _so.FAIL_REASON.SUCCESS)
                    else:
                        callback(None, _so.FAIL_REASON.DISCARDED)
                self._SyncObj__raftLastApplied += 1
        return True

    def _SyncObj__applyLogEntries(self) -> bool:
        """Apply committed entries; with ``commit_notify_s_max`` a leader does not
        send append-entries just to announce its new commit index.

        pysyncobj (``appendEntriesUseBatch=False``) sends every follower an
        append-entries after each apply, only to carry the commit index: one
        more message, wake-up and cycle per follower per entry.  With the
        option, the index rides on the next append-entries that carries
        entries (the next proposal's), or goes out at most
        ``commit_notify_s_max`` later (the heartbeat deadline is brought
        forward).  Followers then apply a little later; commitment, and so
        every acknowledgement, is unchanged.
        """
        core = self._trijet
        if core._defer_apply:
            # applied by the driver once this cycle's outbox is out (Ready.apply);
            # pysyncobj would announce the commit after applying: the same decision,
            # none while applies are held (a leader would send append-entries every
            # cycle until they resume)
            need = (
                self._SyncObj__raftCommitIndex > self._SyncObj__raftLastApplied and core.may_apply()
            )
        else:
            need = self._pysyncobj_apply()
        delay = core.config.commit_notify_s_max
        if need and delay is not None and self._SyncObj__raftState == STATE_LEADER:
            due = self._trijet.now() + delay
            if due < self._SyncObj__newAppendEntriesTime:
                self._SyncObj__newAppendEntriesTime = due
            return False
        return need

    def _SyncObj__sendNextNodeIdx(
        self,
        node: Node,
        reset: bool = False,
        nextNodeIdx: int | None = None,
        success: bool = False,
    ) -> None:
        if self._snap_next is not None and success and nextNodeIdx is None:
            nextNodeIdx, self._snap_next = self._snap_next, None
        _so.SyncObj._SyncObj__sendNextNodeIdx(self, node, reset, nextNodeIdx, success)

    # -- replication: eager and lazy followers

    def _checkCommandsToApply(self) -> None:
        if not self._SyncObj__commandsQueue._FastQueue__queue:
            return  # pysyncobj would take the lock and raise and catch Queue.Empty, every tick
        self._appending = True
        try:
            _so.SyncObj._checkCommandsToApply(self)
        finally:
            self._appending = False

    def _SyncObj__sendAppendEntries(self) -> None:
        """Send append-entries; with ``lazy_follower_s`` a new entry goes at
        once only to the followers a majority needs.

        pysyncobj (``appendEntriesUseBatch=False``) sends every new entry to
        every follower at once.  A commit needs a majority, the leader
        included: with three members, one follower.  So a new entry goes at
        once to that many followers (the *eager* ones: those that answered
        most recently, kept while they keep answering), and the others get it
        at most ``lazy_follower_s`` later, with whatever else was appended
        meanwhile, in one append-entries (the next heartbeat is brought
        forward; heartbeats always go to everyone).  Safety is Raft's own:
        commitment still counts durable copies on a majority; a lagging
        follower is only further behind, as after a lost message, and cannot
        win an election against the majority that holds the entries.  Under a
        stream of sync publishes the lazy follower wakes once per interval
        instead of once per publish, and on a machine with fewer cores than
        processes it stops competing with the leader and the eager follower
        for the CPU on each publish's critical path.
        """
        lazy_s = self._trijet.config.lazy_follower_s
        others = self._SyncObj__otherNodes
        if lazy_s is None or not self._appending or len(others) < 2 or self._SyncObj__readonlyNodes:
            _so.SyncObj._SyncObj__sendAppendEntries(self)
            return
        eager = self._eager_followers(others, lazy_s)
        due = self._SyncObj__newAppendEntriesTime
        self._SyncObj__otherNodes = eager
        try:
            _so.SyncObj._SyncObj__sendAppendEntries(self)
        finally:
            self._SyncObj__otherNodes = others
        self.eager_sends += 1
        # the heartbeat timer is not reset (the lazy followers got nothing),
        # and it comes at the latest lazy_s from now
        self._SyncObj__newAppendEntriesTime = min(due, _so.monotonicTime() + lazy_s)

    def _eager_followers(self, others: set[Node], lazy_s: float) -> set[Node]:
        """The followers (a majority's worth, the leader aside) a new entry goes
        to at once.  An eager follower is kept while it answers (heard within
        ``lazy_s`` of the follower heard last) and no other follower holds more
        of the log (a higher match index: the lazy one only ever trails it,
        unless the eager one stopped taking entries); a replacement is the
        follower that holds the most, then the one heard last -- never one
        still catching up (a member just added, a replica back from a crash)
        while another is current."""
        want = (len(others) + 1) // 2  # a majority of len(others) + 1, less the leader
        heard = self._SyncObj__lastResponseTime
        match = self._SyncObj__raftMatchIndex
        connected = self._SyncObj__connectedNodes
        if len(others) == 2 and len(self._eager) == 1:
            # three members (every new entry of a sync publish): the same rule, unrolled
            (e,) = self._eager
            a, b = others
            o = b if e == a else a
            if (
                e in others
                and e in connected
                and heard.get(e, 0.0) >= heard.get(o, 0.0) - lazy_s
                and match.get(e, 0) >= match.get(o, 0)
            ):
                kept = self._eager_set
                if len(kept) != 1 or e not in kept:
                    kept = self._eager_set = {e}
                return kept
        keep = [n for n in self._eager if n in others and n in connected]
        if keep:
            latest = max(heard.get(n, 0.0) for n in others)
            ahead = max((match.get(n, 0) for n in others if n not in keep), default=0)
            keep = [
                n for n in keep if heard.get(n, 0.0) >= latest - lazy_s and match.get(n, 0) >= ahead
            ]
        if len(keep) < want:
            rest = sorted(
                (n for n in others if n not in keep and n in connected),
                key=lambda n: (-match.get(n, 0), -heard.get(n, 0.0), n.id),
            )
            keep += rest[: want - len(keep)]
            if len(keep) < want:  # not enough connected ones: everyone
                keep = list(others)
        self._eager = keep
        self._eager_set = set(keep)
        return self._eager_set

    # -- snapshots

    def _SyncObj__loadDumpFile(self, clearJournal: bool) -> None:
        if "snapshot_keep" not in self._trijet.config.patches:
            _so.SyncObj._SyncObj__loadDumpFile(self, clearJournal)
            return
        core = self._trijet
        snap = core.snapshots.load()
        if snap is None:
            return
        j = core.journal
        last, prev = snap.last, snap.prev
        applied = self._SyncObj__raftLastApplied
        self._snap_base = last[1]
        if clearJournal and last[1] <= applied:
            self._snap_next = last[1] + 1
            return
        keep = j.term_at(last[1]) == last[2] and j.term_at(prev[1]) == prev[2]
        if keep:
            pos = prev[1] - j.first_index
            if pos > 0:
                j.deleteEntriesTo(pos)
        else:
            j.clear()
            j.add(*prev)
            j.add(*last)
        core.snapshots.restore(snap)
        self._SyncObj__raftLastApplied = last[1]
        commit = max(self._SyncObj__raftCommitIndex, last[1])
        commit = min(commit, j.last_index)
        self._SyncObj__raftCommitIndex = commit
        j.setRaftCommitIndex(commit)
        if not keep:
            self._SyncObj__updateClusterConfiguration(
                [Node(m) for m in snap.members if m != core.node_id]
            )
        if clearJournal:
            self._snap_next = last[1] + 1
