"""The short cycles (raft.core_fast: a leader's append-only and commit-only
cycles, a follower's answer-only cycle) in the deterministic
simulator (chaos.sim), against the full cycle they stand in for.

Twin simulations from one seed run the same steps, one with the short cycles
and one without: every message the cycle sends, the journal and the commit
index must be the same.  A steady stream of entries must still get the full
cycle's work done (compaction) on every member.  The simulator's Raft safety
checks run on every step.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import raft.core as core_module
from chaos.sim import Simulation
from raft.core import RaftCore
from raft.core_fast import FULL_CYCLE_S
from raft.wire import decode_messages
from tests.raft.simwait import lazy_sim, run_for, run_until, settled_leader


def sim_of(compaction_entries: int = 10**9) -> Simulation:
    return lazy_sim(seed=5, compaction_entries=compaction_entries)


@contextmanager
def full_cycles_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every cycle the full one (the short ones refused)."""
    with monkeypatch.context() as m:
        m.setattr(core_module, "short_cycle", lambda core, defer_apply: None)
        yield


def record(sim: Simulation) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Every message sent from now on: (src, dst, messages)."""
    out: list[tuple[str, str, list[dict[str, Any]]]] = []
    inner = sim.send

    def send(src: str, outbox: Iterable[tuple[str, bytes]]) -> None:
        outbox = list(outbox)
        out.extend((src, dst, decode_messages(payload)) for dst, payload in outbox)
        inner(src, outbox)

    sim.send = send  # type: ignore[method-assign]
    return out


def state(core: RaftCore) -> tuple[Any, ...]:
    j = core.journal
    return (
        j.last_index,
        core.commit_index,
        core.term,
        [j.term_at(i) for i in range(1, j.last_index + 1)],
    )


def one_write(sim: Simulation, leader: RaftCore, value: bytes) -> list[object]:
    """Propose on the leader and run its cycle at once (the trio driver's
    ``proposed``), then run the simulation until it commits."""
    out: list[object] = []
    p = leader.propose(value)
    p.on_done = lambda p: out.append(p.error if p.error is not None else p.result)
    sim.run_cycle(leader.node_id, leader)
    run_until(sim, lambda: bool(out), "the commit")
    return out


def test_short_cycles_send_and_keep_what_the_full_cycles_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast, full = sim_of(), sim_of()
    lf, lg = settled_leader(fast), settled_leader(full)
    assert lf.node_id == lg.node_id and state(lf) == state(lg)
    sent_fast, sent_full = record(fast), record(full)

    def counts(sim: Simulation) -> tuple[int, int, int]:
        cores = [c for _, c in sim.up()]
        return (
            sum(c.append_only_cycles for c in cores),
            sum(c.commit_only_cycles for c in cores),
            sum(c.answer_only_cycles for c in cores),
        )

    before_fast, before_full = counts(fast), counts(full)
    results_fast = [one_write(fast, lf, b"v%d" % i) for i in range(20)]
    with full_cycles_only(monkeypatch):
        results_full = [one_write(full, lg, b"v%d" % i) for i in range(20)]
        run_for(full, 0.1)
    run_for(fast, 0.1)
    assert results_fast == results_full
    assert sent_fast == sent_full  # the same messages, to the same members, in order
    for (nid, a), (_, b) in zip(fast.up(), full.up(), strict=True):
        assert state(a) == state(b), nid
    # the short cycles did run: the leader's appends and commits, the followers' answers
    appends, commits, answers = (a - b for a, b in zip(counts(fast), before_fast, strict=True))
    # (most: a full cycle comes every FULL_CYCLE_S all the same)
    assert appends >= 15 and commits >= 15 and answers >= 15, (appends, commits, answers)
    assert counts(full) == before_full


def test_a_steady_stream_of_entries_still_gets_the_full_cycles_work_done() -> None:
    """Entries every millisecond (each follower's cycles could all be short):
    a full cycle still comes every ``FULL_CYCLE_S``, so every member compacts
    its journal."""
    sim = sim_of(compaction_entries=40)
    leader = settled_leader(sim)
    taken0 = {nid: c.snapshots.taken for nid, c in sim.up()}
    answered0 = {nid: c.answer_only_cycles for nid, c in sim.up()}
    n = 0
    end = sim.t + 20 * FULL_CYCLE_S
    while sim.t < end:
        p = leader.propose(b"s%d" % n)
        n += 1
        sim.run_cycle(leader.node_id, leader)
        run_for(sim, 0.001)
        assert p.error is None
    for nid, c in sim.up():
        assert c.snapshots.taken > taken0[nid], nid
        assert len(c.journal) < n, nid  # compacted
        if nid != leader.node_id:
            assert c.answer_only_cycles > answered0[nid], nid


class _Log(list):  # type: ignore[type-arg]
    """pysyncobj's log as the commit step reads it: (command, index, term)."""

    committed: list[int]

    def setRaftCommitIndex(self, idx: int) -> None:
        self.committed.append(idx)


class _Leader:
    """The fields of a pysyncobj leader the commit step reads (name-mangled)."""

    def __init__(self, terms: list[int], term: int, commit: int, matches: list[int]) -> None:
        log = _Log((b"", i + 1, t) for i, t in enumerate(terms))
        log.committed = []
        self._SyncObj__raftLog = log
        self._SyncObj__raftCommitIndex = commit
        self._SyncObj__raftCurrentTerm = term
        self._SyncObj__otherNodes = [f"f{i}" for i in range(len(matches))]
        self._SyncObj__raftMatchIndex = dict(zip(self._SyncObj__otherNodes, matches, strict=True))
        self._SyncObj__leaderCommitIndex = 0

    def _SyncObj__getEntries(self, idx: int, count: int) -> list[tuple[bytes, int, int]]:
        return list(self._SyncObj__raftLog[idx - 1 : idx - 1 + count])


@pytest.mark.parametrize(
    ("terms", "term", "commit", "matches", "want"),
    [
        # a majority holds 3 (the leader and one follower of two): committed
        ([1, 1, 1], 1, 1, [3, 1], 3),
        # only the leader holds 3: not committed
        ([1, 1, 1], 1, 1, [1, 1], 1),
        # Raft's rule (Figure 8): an earlier term's entry is never committed by
        # counting replicas, only with an entry of the current term after it
        ([1, 2, 2], 3, 1, [3, 3], 1),
        ([1, 2, 2, 3], 3, 1, [3, 3], 1),
        ([1, 2, 2, 3], 3, 1, [4, 1], 4),
        # five members: two followers and the leader make a majority
        ([1, 1, 1, 1], 1, 1, [4, 3, 1, 1], 3),
        ([1, 1, 1, 1], 1, 1, [4, 1, 1, 1], 1),
    ],
)
def test_the_commit_step_is_rafts_rule(
    terms: list[int], term: int, commit: int, matches: list[int], want: int
) -> None:
    from raft.core_fast import _commit_step

    leader = _Leader(terms, term, commit, matches)
    _commit_step(leader)
    assert leader._SyncObj__raftCommitIndex == want
    assert leader._SyncObj__leaderCommitIndex == want
    assert leader._SyncObj__raftLog.committed == ([want] if want != commit else [])
