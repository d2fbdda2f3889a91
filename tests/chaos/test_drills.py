"""One short failover drill per fault family against a real three-node nats-server 2.15.1 cluster.

Each drill is ``python -m chaos run`` in miniature (a few seconds of faults, seeded, printed with
its replay command) and asserts the checkers' verdicts where nats-server is known to hold them
with ``sync_interval: always``.  All drills together stay well under three minutes.  trijet's
drill is skipped until its replicated streams land.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chaos.powerloss import available as power_unavailable
from chaos.run import RunConfig, run
from chaos.supervisor import SupervisorError, nats_server_binary

FAULT_S = 6.0
SAFETY = ("S1", "S2", "S3", "S4", "S5", "S6", "S7", "W2", "C2", "C4", "C5", "KV")


def _server() -> None:
    try:
        nats_server_binary()
    except SupervisorError as exc:
        pytest.skip(str(exc))


def drill(tmp_path: Path, scenario: str, seed: int, **kw: Any) -> dict[str, dict[str, Any]]:
    _server()
    cfg = RunConfig(
        scenario, "nats-server", seed, kw.pop("duration", FAULT_S), tmp_path / scenario,
        sync_always=kw.pop("sync_always", True), rate_per_s=25.0,
        quiet_s=kw.pop("quiet_s", 15.0), drain_s=kw.pop("drain_s", 10.0),
    )  # fmt: skip
    result = run(cfg)
    verdicts = {v["name"]: v for v in result["verdicts"]}
    for v in verdicts.values():
        if v["ok"] is not True:
            print(v["name"], v["ok"], v["bad"], v["examples"][:2], v["detail"])
    assert (cfg.out / "report.html").exists()
    assert result["ops"]["publish"]["ok"] > 0
    return verdicts


def assert_hold(verdicts: dict[str, dict[str, Any]], names: tuple[str, ...]) -> None:
    broken = {n: verdicts[n] for n in names if verdicts[n]["ok"] is not True}
    assert not broken, broken


@pytest.mark.timeout(90)
def test_process_kill_leader(tmp_path: Path) -> None:
    v = drill(tmp_path, "kill-leader", 11)
    assert_hold(v, (*SAFETY, "C1", "C3", "L1"))


@pytest.mark.timeout(90)
def test_pause_leader(tmp_path: Path) -> None:
    v = drill(tmp_path, "pause-leader", 12)
    assert_hold(v, (*SAFETY, "L1"))


@pytest.mark.timeout(90)
def test_partition_isolate_leader(tmp_path: Path) -> None:
    v = drill(tmp_path, "partition-leader", 13)
    assert_hold(v, (*SAFETY, "L1"))


@pytest.mark.timeout(90)
def test_slow_links(tmp_path: Path) -> None:
    v = drill(tmp_path, "slow-links", 14)
    assert_hold(v, (*SAFETY, "C1", "C3", "L1"))


@pytest.mark.timeout(90)
def test_stepdown_churn(tmp_path: Path) -> None:
    v = drill(tmp_path, "stepdown", 15)
    assert_hold(v, (*SAFETY, "C1", "C3", "L1"))


@pytest.mark.timeout(90)
def test_corrupt_minority(tmp_path: Path) -> None:
    v = drill(tmp_path, "corrupt-minority", 16)
    # the damaged follower may lose or refuse data; the majority's acknowledged writes may not
    assert_hold(v, ("S2", "S5", "S6", "S7", "W2"))


@pytest.mark.timeout(90)
def test_power_loss_one_node(tmp_path: Path) -> None:
    why = power_unavailable()
    if why is not None:
        pytest.skip(f"power loss needs FUSE: {why}")
    v = drill(tmp_path, "power-loss-one", 17)
    assert_hold(v, (*SAFETY, "L1"))


@pytest.mark.timeout(90)
def test_disk_full(tmp_path: Path) -> None:
    why = power_unavailable()
    if why is not None:
        pytest.skip(f"disk-full needs FUSE: {why}")
    # nats-server 2.15.1 disables JetStream on a write error and keeps it off after space
    # returns, so the cluster does not converge (L1, S3): only what was read must hold
    v = drill(tmp_path, "disk-full", 18, quiet_s=6.0, drain_s=4.0)
    assert_hold(v, ("S1", "S2", "S5", "S6", "S7", "W2"))


@pytest.mark.skip(
    reason="trijet's JetStream is not one cluster yet (replicated streams #8-#10): the harness "
    "runs against it (python -m chaos run none --target trijet) but its verdicts mean nothing yet"
)
def test_trijet_baseline(tmp_path: Path) -> None:
    cfg = RunConfig("none", "trijet", 1, FAULT_S, tmp_path / "trijet", sync_always=True)
    result = run(cfg)
    assert all(v["ok"] is not False for v in result["verdicts"])
