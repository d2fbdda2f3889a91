"""Stepping the deterministic simulator (chaos.sim) until a condition holds, for raft tests."""

from __future__ import annotations

from collections.abc import Callable

from chaos.sim import SimConfig, Simulation
from raft.core import RaftCore

SIM_S_MAX = 10.0  # simulated seconds any wait may take
#: a stream group's lazy-follower interval and commit announcement (cluster.replicated)
LAZY_S = 0.02


def run_until(sim: Simulation, pred: Callable[[], bool], what: str) -> float:
    """Step the simulation until ``pred()``, its safety checks on every step;
    the simulated time it took."""
    t0 = sim.t
    while not pred():
        assert sim.t - t0 < SIM_S_MAX, f"{what}: not within {SIM_S_MAX} simulated s"
        sim.step(t0 + SIM_S_MAX)
        assert not sim.result.violations, sim.result.violations
    return sim.t - t0


def lazy_sim(
    lazy: float | None = LAZY_S,
    seed: int = 3,
    compaction_entries: int = SimConfig.compaction_entries,
) -> Simulation:
    """A three-member group run as stream groups run (eager and lazy
    followers, the commit announced with the next entries), no faults, no
    clients: the test drives it."""
    sim = Simulation(
        seed,
        SimConfig(
            duration_s=0.0,
            settle_s=0.0,
            quiet_after_s=None,
            lazy_follower_s=lazy,
            commit_notify_s_max=LAZY_S,  # as stream groups run (cluster.replicated)
            # the leader's own write is never left to a later cycle, as in the
            # trio driver (``leader_write_overlap`` off)
            leader_write_lag=0.0,
            compaction_entries=compaction_entries,
        ),
    )
    sim.faults_on = False
    sim.clients_on = False
    return sim


def run_for(sim: Simulation, secs: float) -> None:
    """Step the simulation for ``secs`` simulated seconds, its safety checks on every step."""
    end = sim.t + secs
    while sim.t < end:
        sim.step(end)
        assert not sim.result.violations, sim.result.violations


def settled_leader(sim: Simulation) -> RaftCore:
    """Run until a leader is elected, then a little longer; the leader."""
    run_until(sim, lambda: sim.leader() is not None, "a leader")
    run_for(sim, 0.3)
    leader = sim.leader()
    assert leader is not None
    return leader
