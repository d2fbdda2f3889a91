"""How a Raft group member settles proposals that pysyncobj alone would leave waiting.

A mixin of :class:`raft.core.RaftCore` (which owns the attributes declared here):
results of applied batches handed to their proposals (``_resolve``), proposals forwarded
to a leader resolved from the applied log when the leader's answer is lost
(``_watch_applied``, ``_settle_watches``), and the orphans of snapshot installs, of a
lead lost and regained and of forwarded requests that are never answered
(``_sweep_orphans``).  Each rule is in its method's docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pysyncobj.config import FAIL_REASON

from raft.config import RaftConfig
from raft.errors import ApplyFailed, ProposalDropped, RaftError
from raft.journal import DurableJournal
from raft.proposal import Proposal
from raft.snapshot import SnapshotStore
from raft.syncobj import STATE_LEADER, TrijetSyncObj

__all__ = ["ProposalSettling"]

#: a proposal's entry was skipped by a snapshot install: its outcome cannot be learnt
_OUTCOME_LOST = -1


class ProposalSettling:
    """Proposal settling for :class:`raft.core.RaftCore` (see the module docstring)."""

    obj: TrijetSyncObj
    journal: DurableJournal
    snapshots: SnapshotStore
    config: RaftConfig
    now: Callable[[], float]
    orphans_failed: int
    watch_resolved: int
    _completions: list[tuple[Proposal, Any, RaftError | None]]
    _watch: dict[bytes, Any]
    _installs_swept: int
    _lead_term: int
    _beyond_since: float | None
    _forwarded_since: dict[Any, float]
    term: int
    leader_id: str | None

    def _resolve(self, props: list[Proposal], res: Any) -> None:
        if props and (not isinstance(res, list) or len(res) != len(props)):
            for p in props:
                self._completions.append(
                    (p, None, ProposalDropped("result mismatch", maybe_committed=True))
                )
            return
        for p, r in zip(props, res or [None] * len(props), strict=False):
            if isinstance(r, ApplyFailed):
                self._completions.append((p, None, r))
            else:
                self._completions.append((p, r, None))

    def _watch_applied(self, cmd: bytes, results: list[object] | None) -> None:
        """A regular entry applied: a forwarded proposal's, if watched."""
        hit = self._watch.pop(cmd, None)
        if hit is not None:
            self._resolve(hit[0], results)

    def _settle_watches(self) -> None:
        """Resolve forwarded proposals whose answer was lost, from the applied log.

        Every proposal forwarded to the leader is watched from the start: its
        command showing up among the applied entries resolves it, whatever
        became of the leader's answer.  Once that answer is known lost (the
        leader changed, or it never came), the proposal is also marked with
        the term ``t`` this member was in then and the leader it went to: it
        is provably not committed once an applied entry is of a later term
        than ``t`` (a leader's own entries follow every older entry it kept),
        or of term ``t`` from a leader other than the one it went to (only
        that one could have appended it in ``t``; a link delivers in order,
        so a request is never taken up after a later message of ours).  Past
        ``watch_s_max`` it stays unknown (maybe committed).
        """
        j = self.journal
        term = j.term_at(self.obj._SyncObj__raftLastApplied)
        now = self.now()
        for key, (props, t, target, until) in list(self._watch.items()):
            if t is None:
                continue  # the leader's answer may still come
            error: RaftError
            if term is not None and (
                term > t or (term == t and self.term == t and self.leader_id not in (None, target))
            ):
                error = ProposalDropped("forwarded, not in the log", maybe_committed=False)
            elif now > until:
                error = ProposalDropped("forwarded, outcome unknown", maybe_committed=True)
            else:
                continue
            del self._watch[key]
            self.watch_resolved += 1
            for p in props:
                self._completions.append((p, None, error))

    def _sweep_orphans(self) -> None:
        """Resolve proposals pysyncobj would leave waiting forever.

        * Entries this member proposed as leader wait in pysyncobj's
          ``commandsWaitingCommit`` until their index is applied; a snapshot
          install jumps the applied index past them, so they never are.  After
          an install every waiter at or below the applied index is resolved:
          ``ProposalDropped(maybe_committed=False)`` when the journal shows
          another term at its index (overwritten), else maybe committed (the
          snapshot may include it; its result is unknown).
        * A member elected leader again no longer holds some entries it
          appended in an earlier term (a leader's log is never overwritten):
          their waiters are discarded at once.
        * A follower holding uncommitted entries it appended as leader in an
          earlier term keeps their waiters until the new leader's log reaches
          that index (maybe never: an idle group); after
          ``forward_reply_s_max`` they are failed as maybe committed.
        * A forwarded proposal waits for the leader's ``apply_command_response``
          until the next leader change; a lost request or answer would keep it
          waiting.  After ``forward_reply_s_max`` it is failed as maybe committed.
        """
        obj = self.obj
        installed = self.snapshots.installed
        if installed != self._installs_swept:
            self._installs_swept = installed
            waiting = obj._SyncObj__commandsWaitingCommit
            applied = obj._SyncObj__raftLastApplied
            for idx in sorted(i for i in waiting if i <= applied):
                have = self.journal.term_at(idx)
                for term, cb in waiting.pop(idx):
                    self.orphans_failed += 1
                    if have is not None and have != term:
                        cb(None, FAIL_REASON.DISCARDED)
                    else:
                        cb(None, _OUTCOME_LOST)
            for props, *_ in self._watch.values():  # the snapshot may hold them
                for p in props:
                    self._completions.append(
                        (p, None, ProposalDropped("covered by a snapshot", maybe_committed=True))
                    )
            self._watch.clear()
        if self._watch:
            self._settle_watches()
        waiting = obj._SyncObj__commandsWaitingCommit
        if waiting and obj._SyncObj__raftState == STATE_LEADER and self._lead_term != self.term:
            # elected (again): a leader's log is never overwritten, so what it
            # proposed in an earlier term and no longer holds is lost for good
            self._lead_term = self.term
            j = self.journal
            for idx in sorted(i for i, w in waiting.items() if w and j.term_at(i) != w[0][0]):
                have = j.term_at(idx)
                keep = []
                for term, cb in waiting.pop(idx):
                    if have == term:
                        keep.append((term, cb))
                        continue
                    self.orphans_failed += 1
                    cb(None, FAIL_REASON.DISCARDED)
                if keep:
                    waiting[idx] = keep
        elif waiting and obj._SyncObj__raftState != STATE_LEADER:
            # appended as leader in an earlier term and not committed: a new
            # leader cuts or overwrites them only when its own log reaches
            # that index, and an idle group may never get there
            commit = obj._SyncObj__raftCommitIndex
            term_now = obj._SyncObj__raftCurrentTerm
            beyond = [i for i, w in waiting.items() if i > commit and w and w[0][0] < term_now]
            if not beyond:
                self._beyond_since = None
            elif self._beyond_since is None:
                self._beyond_since = self.now()
            elif self.now() - self._beyond_since > self.config.forward_reply_s_max:
                self._beyond_since = None
                for idx in sorted(beyond):
                    for _term, cb in waiting.pop(idx):
                        self.orphans_failed += 1
                        cb(None, FAIL_REASON.UNKNOWN_OUTCOME)
        replies = obj._SyncObj__commandsWaitingReply
        since = self._forwarded_since
        if not replies:
            if since:
                since.clear()
            return
        now = self.now()
        limit = self.config.forward_reply_s_max
        for rid in list(replies):
            t0 = since.setdefault(rid, now)
            if now - t0 > limit:
                cb = replies.pop(rid)
                self.orphans_failed += 1
                cb(None, FAIL_REASON.UNKNOWN_OUTCOME)
        if len(since) > len(replies):
            for rid in [r for r in since if r not in replies]:
                del since[rid]
