"""CI smoke of the deterministic Raft simulator: 200 seeds, zero safety violations."""

from __future__ import annotations

import pytest

from chaos.sim import SimConfig, main, run_seed, run_seeds

SEEDS = 200


@pytest.mark.timeout(400)
def test_200_seeds_no_violations() -> None:
    results = run_seeds(range(SEEDS), SimConfig(), jobs=2)
    bad = [(r.seed, r.violations) for r in results if r.violations]
    for seed, v in bad:
        print(f"seed {seed}: {v[:3]} -- replay: python -m chaos.sim --seed {seed}")
    assert not bad
    assert sum(r.acked for r in results) > SEEDS * 50  # the workload did commit things
    assert sum(r.crashes for r in results) > SEEDS  # and faults happened


@pytest.mark.timeout(400)
def test_100_seeds_with_lazy_followers_no_violations() -> None:
    # a new entry goes at once to one follower, to the other up to 20 ms later
    cfg = SimConfig(lazy_follower_s=0.02, commit_notify_s_max=0.02)
    results = run_seeds(range(1000, 1100), cfg, jobs=2)
    bad = [(r.seed, r.violations) for r in results if r.violations]
    for seed, v in bad:
        print(f"seed {seed}: {v[:3]} -- replay: {run_seed(seed, cfg).replay(cfg)}")
    assert not bad
    assert sum(r.acked for r in results) > 100 * 50
    assert sum(r.crashes for r in results) > 100


def test_checker_catches_seeded_ack_before_fsync_bug() -> None:
    # calibration: with the "acknowledge before fsync" bug seeded, some seed must fail
    cfg = SimConfig(unsafe_send_before_fsync=True)
    assert any(run_seed(s, cfg).violations for s in (55, 57, 69, 94))


def test_cli_prints_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "2", "--start", "1000"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == "2 seeds, 0 violations"


def test_replay_is_deterministic() -> None:
    a, b = run_seed(31), run_seed(31)
    assert (a.steps, a.acked, a.elections, a.crashes) == (b.steps, b.acked, b.elections, b.crashes)
