"""CI run of a stream group's real state machine under the deterministic simulator.

200 seeds of ``chaos.streamsim`` (crashes with torn journals, wiped stores, partitions,
leader changes, compaction by state snapshots, catch-up from peers' stores): no Raft or
stream safety violation (no acknowledged message lost, replicas equal at equal applied
index, no sequence assigned twice).  Longer: ``python -m chaos.sim --workload stream
--seeds 2000 --jobs 2``.
"""

from __future__ import annotations

import pytest

from chaos.sim import SimConfig, run_seeds
from chaos.streamsim import StreamSimulation

SEEDS = 200
CFG = SimConfig(workload="stream")


@pytest.mark.timeout(300)
def test_200_seeds_of_a_stream_group_no_violations() -> None:
    results = run_seeds(range(SEEDS), CFG, jobs=2)
    bad = [(r.seed, r.violations) for r in results if r.violations]
    for seed, v in bad:
        print(
            f"seed {seed}: {v[:3]} -- replay: python -m chaos.sim --workload stream --seed {seed}"
        )
    assert not bad
    assert sum(r.acked for r in results) > SEEDS * 30  # publishes were acknowledged
    assert sum(r.crashes for r in results) > SEEDS  # faults happened
    assert sum(r.snapshots for r in results) > SEEDS  # the journal was compacted
    assert sum(r.catchups for r in results) > SEEDS // 10  # and holes were filled


def test_the_checks_catch_a_catch_up_that_drops_messages() -> None:
    class Lossy(StreamSimulation):
        lossy_catchup = True

    found = []
    for seed in range(40):
        sim = Lossy(seed, CFG)
        r = sim.run()
        if r.catchups and r.violations:
            found.append(seed)
            break
    assert found, "a lossy catch-up went unnoticed"
