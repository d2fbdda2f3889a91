"""Stepping the deterministic simulator (chaos.sim) until a condition holds, for raft tests."""

from __future__ import annotations

from collections.abc import Callable

from chaos.sim import Simulation

SIM_S_MAX = 10.0  # simulated seconds any wait may take


def run_until(sim: Simulation, pred: Callable[[], bool], what: str) -> float:
    """Step the simulation until ``pred()``, its safety checks on every step;
    the simulated time it took."""
    t0 = sim.t
    while not pred():
        assert sim.t - t0 < SIM_S_MAX, f"{what}: not within {SIM_S_MAX} simulated s"
        sim.step(t0 + SIM_S_MAX)
        assert not sim.result.violations, sim.result.violations
    return sim.t - t0
