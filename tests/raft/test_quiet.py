"""Hibernating groups (raft.quiet) in the deterministic simulator (chaos.sim).

Each test builds a three-member group on the simulator's fake clock (no
random faults, no random client), lets it hibernate, then does one thing to
it and checks what must follow -- on simulated time, so nothing here depends
on the machine's speed. The simulator's Raft safety checks run on every step
throughout; any violation fails the test.
"""

from __future__ import annotations

import random

import pytest

from chaos.sim import SimConfig, Simulation
from raft.core import RaftCore
from raft.liveness import SILENCE_S, PeerLiveness
from tests.raft.simwait import SIM_S_MAX, run_until


def quiet_sim(seed: int = 1) -> Simulation:
    sim = Simulation(seed, SimConfig(duration_s=0.0, settle_s=0.0))
    sim.faults_on = False
    sim.clients_on = False
    return sim


def all_quiet(sim: Simulation) -> bool:
    up = sim.up()
    leaders = [c for _, c in up if c.is_leader]
    return len(leaders) == 1 and all(c.quiet for _, c in up)


def propose(sim: Simulation, core: RaftCore, value: bytes) -> list[object]:
    out: list[object] = []
    p = core.propose(value)
    p.on_done = lambda p: out.append(p.error if p.error is not None else p.result)
    return out


def hibernate(sim: Simulation) -> RaftCore:
    leader = None

    def ready() -> bool:
        nonlocal leader
        leader = sim.leader()
        return leader is not None

    run_until(sim, ready, "first leader")
    assert leader is not None
    done = propose(sim, leader, b"v1")
    run_until(sim, lambda: bool(done), "first entry")
    assert done == [1]
    run_until(sim, lambda: all_quiet(sim), "hibernation")
    leader = sim.leader()
    assert leader is not None
    return leader


def test_idle_group_hibernates_and_stays_quiet() -> None:
    sim = quiet_sim()
    leader = hibernate(sim)
    term = leader.term
    steps = sim.result.steps
    cycles_before = {nid: c.quiet_state.woken for nid, c in sim.up()}
    end = sim.t + 5.0
    while sim.t < end:
        sim.step(end)
    assert all_quiet(sim)
    assert sim.leader() is leader and leader.term == term
    assert {nid: c.quiet_state.woken for nid, c in sim.up()} == cycles_before
    # only the links' pings (every BEAT_S, 6 directed links) step the clock
    assert sim.result.steps - steps < 5.0 / 0.075 * 6 * 2 + 20
    for _, c in sim.up():
        assert c.next_deadline() == float("inf")
        assert c.commit_index == c.journal.last_index == leader.journal.last_index


@pytest.mark.parametrize("on", ["leader", "follower"])
def test_proposal_wakes_and_commits_then_hibernates_again(on: str) -> None:
    sim = quiet_sim(2)
    leader = hibernate(sim)
    target = leader if on == "leader" else next(c for _, c in sim.up() if not c.is_leader)
    done = propose(sim, target, b"v2")
    run_until(sim, lambda: bool(done), "proposal on a hibernating group")
    assert done == [2]
    run_until(sim, lambda: all_quiet(sim), "hibernation again")
    assert sim.leader() is leader  # woken without an election
    for _, c in sim.up():
        assert c.last_applied == leader.journal.last_index


def test_crash_of_a_quiet_leader_elects_a_new_one_in_election_time() -> None:
    sim = quiet_sim(3)
    leader = hibernate(sim)
    sim.crash(leader.node_id, mid_cycle=False)
    sim.restart_at.clear()  # it stays down
    took = run_until(sim, lambda: sim.leader() is not None, "new leader")
    # the link goes down at once: as a busy group, within an election timeout (+ a vote)
    assert took <= leader.config.election_timeout_s_max + 0.1
    new = sim.leader()
    assert new is not None and new.node_id != leader.node_id
    done = propose(sim, new, b"v2")
    run_until(sim, lambda: bool(done), "commit after failover")
    assert done == [2]  # the toy state machine answers the value's position


def test_partitioned_quiet_leader_is_replaced_via_link_silence() -> None:
    sim = quiet_sim(4)
    leader = hibernate(sim)
    sim.net.isolate(leader.node_id, sim.ids)  # no link event: only silence tells
    took = run_until(
        sim,
        lambda: any(c.is_leader for n, c in sim.up() if n != leader.node_id),
        "leader on the majority side",
    )
    assert took <= SILENCE_S + leader.config.election_timeout_s_max + 0.2
    # the old leader wakes on its followers' silence and falls back
    run_until(sim, lambda: not leader.is_leader, "old leader steps down")
    sim.net.heal()
    run_until(sim, lambda: all_quiet(sim), "hibernation after the heal")


def test_lost_quiet_messages_keep_the_group_awake_without_an_election() -> None:
    sim = quiet_sim(5)
    run_until(sim, lambda: sim.leader() is not None, "first leader")
    leader = sim.leader()
    assert leader is not None
    follower = next(n for n, _ in sim.up() if n != leader.node_id)
    sim.net.block(leader.node_id, follower)  # quiet and heartbeats to it are lost
    done = propose(sim, leader, b"v1")
    run_until(sim, lambda: bool(done), "commit with one follower")
    end = sim.t + 1.0
    while sim.t < end:
        sim.step(end)
    assert not leader.quiet  # the blocked follower never confirmed
    sim.net.heal()
    run_until(sim, lambda: all_quiet(sim), "hibernation after the heal")


def test_delayed_duplicated_quiet_frames_are_harmless() -> None:
    sim = quiet_sim(6)
    sim.net.faults.duplicate = 0.5
    sim.net.faults.reorder = 0.5
    sim.net.faults.delay_s_max = 0.05
    leader = hibernate(sim)
    for i in range(5):
        done = propose(sim, leader, f"x{i}".encode())
        run_until(sim, lambda done=done: bool(done), "commit")
        run_until(sim, lambda: all_quiet(sim) or sim.leader() is not leader, "quiet again")
    leader = sim.leader()
    assert leader is not None
    for _, c in sim.up():
        assert c.last_applied == leader.last_applied


def test_an_election_wakes_a_hibernating_group() -> None:
    sim = quiet_sim(7)
    leader = hibernate(sim)
    p = leader.transfer_leadership()  # TimeoutNow: a follower stands for election
    p.on_done = None
    run_until(
        sim, lambda: (new := sim.leader()) is not None and new is not leader, "transferred lead"
    )
    run_until(sim, lambda: all_quiet(sim), "hibernation under the new leader")
    assert not leader.is_leader


def test_restarted_follower_rejoins_a_quiet_group() -> None:
    sim = quiet_sim(8)
    leader = hibernate(sim)
    follower = next(n for n, _ in sim.up() if n != leader.node_id)
    sim.crash(follower, mid_cycle=False)
    sim.restart_at.clear()
    done = propose(sim, leader, b"while-down")
    run_until(sim, lambda: bool(done), "commit with a follower down")
    sim.start(follower)
    run_until(sim, lambda: all_quiet(sim), "hibernation with the follower back")
    assert sim.leader() is leader
    assert all(c.last_applied == leader.last_applied for _, c in sim.up())


class _FirstCandidateSim(Simulation):
    """Members of a new group started with ``first_candidate`` (n0)."""

    late: set[str] = set()

    def start(self, nid: str) -> None:
        if nid in self.late and self.t == 0.0:
            self.restart_at[nid] = 0.1  # starts later, as a slow node's group would
            return
        core = RaftCore(
            "sim",
            nid,
            self.ids,
            self.new_fsm(),
            self.disks[nid],
            self.raft_config,
            now=lambda: self.t,
            rng=random.Random(self.rng.getrandbits(64)),
            first_candidate="n0",
        )
        self.cores[nid] = core
        self.live[nid] = PeerLiveness(SILENCE_S)
        core.quiet_state.heard = self.live[nid].last_heard
        self.checked_commit[nid] = 0
        core.journal.take_changed_from()


@pytest.mark.parametrize("late", [set(), {"n1", "n2"}])
def test_a_new_groups_first_candidate_leads_within_a_round_trip(late: set[str]) -> None:
    _FirstCandidateSim.late = late
    sim = _FirstCandidateSim(9, SimConfig(duration_s=0.0, settle_s=0.0))
    sim.faults_on = False
    sim.clients_on = False
    start = 0.1 if late else 0.0
    took = run_until(sim, lambda: sim.leader() is not None, "first leader")
    leader = sim.leader()
    assert leader is not None and leader.node_id == "n0" and leader.term == 1
    # well inside the minimum election timeout: no random timeout was waited for
    assert took - start < leader.config.election_timeout_s_min / 3


def test_a_follower_with_a_lost_forward_does_not_hibernate_until_it_is_resolved() -> None:
    sim = quiet_sim(10)
    leader = hibernate(sim)
    nid, follower = next((n, c) for n, c in sim.up() if not c.is_leader)
    sim.net.block(nid, leader.node_id)  # the forwarded proposal is lost
    done = propose(sim, follower, b"lost")
    end = sim.t + 0.3
    while sim.t < end:
        sim.step(end)
    sim.net.heal()
    # the forward's own timers resolve it; meanwhile the follower stays awake
    took = run_until(sim, lambda: bool(done), "the lost forward resolved")
    assert took < SIM_S_MAX
    run_until(sim, lambda: all_quiet(sim), "hibernation once resolved")
    assert not follower.outstanding()
