"""Short failover drills against real three-node clusters: nats-server 2.15.1 and trijet.

Each drill is ``python -m chaos run`` in miniature (a few seconds of faults, seeded, printed with
its replay command) and asserts the checkers' verdicts where the target is known to hold them:
nats-server with ``sync_interval: always``, one drill per fault family the harness was proven
on; trijet (R3 streams and their consumers through the streams' Raft groups), one drill per
fault family it holds today (F1 F2 F3 F4 F5 F7 F8 F9 F13; F6 is F7 on one node, left to
the campaign; not F11 disk-full: a write error ends the node's stream groups until restart):
the stream side (S1-S7, S3 replica agreement, W2, KV), the consumer side (C1-C6) and L1, after
at least one fault.  ``TRIJET_CONSUMERS_REPLICATED`` turns the consumer side
into expected failures (for a build whose consumers do not replicate).  All drills together
take about four minutes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chaos.powerloss import available as power_unavailable
from chaos.run import RunConfig, run
from chaos.supervisor import SupervisorError, Target, nats_server_binary

FAULT_S = 6.0
TRIJET_FAULT_S = 4.0
SAFETY = ("S1", "S2", "S3", "S4", "S5", "S6", "S7", "W2", "C2", "C4", "C5", "KV")
#: trijet's stream side: every ok write on every replica, no fork or duplicate, replicas agree
STREAM_SIDE = ("S1", "S2", "S3", "S4", "S5", "S6", "S7", "W2", "KV")
CONSUMER_SIDE = ("C1", "C2", "C3", "C4", "C5", "C6")
#: consumers of replicated streams replicate (#10, merged): their verdicts are asserted too
TRIJET_CONSUMERS_REPLICATED = True
CONSUMER_GAP = (
    "consumers of trijet's replicated streams are not replicated yet (#10): the consumer lives "
    "on one server, so a failover loses its state"
)


def _server() -> None:
    try:
        nats_server_binary()
    except SupervisorError as exc:
        pytest.skip(str(exc))


def drill(
    tmp_path: Path, scenario: str, seed: int, target: Target = "nats-server", **kw: Any
) -> dict[str, dict[str, Any]]:
    if target == "nats-server":
        _server()
    cfg = RunConfig(
        scenario, target, seed, kw.pop("duration", FAULT_S), tmp_path / scenario,
        sync_always=kw.pop("sync_always", True), rate_per_s=25.0,
        quiet_s=kw.pop("quiet_s", 15.0), drain_s=kw.pop("drain_s", 10.0),
        agree_s=kw.pop("agree_s", None),
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
    v = drill(tmp_path, "disk-full", 18, quiet_s=6.0, drain_s=4.0, agree_s=1.0)
    assert_hold(v, ("S1", "S2", "S5", "S6", "S7", "W2"))


# -- trijet -----------------------------------------------------------------------------------


def assert_trijet(
    verdicts: dict[str, dict[str, Any]],
    stream_side: tuple[str, ...] = STREAM_SIDE,
    consumer_side: tuple[str, ...] = CONSUMER_SIDE,
) -> None:
    """The stream side must hold, and L1 but for the consumer drain; then the consumer side
    holds, or (while consumers are not replicated) the drill is an expected failure."""
    assert_hold(verdicts, stream_side)
    l1 = [e for e in verdicts["L1"]["examples"] if "consumer_not_drained" not in e]
    assert not l1, verdicts["L1"]
    broken = [n for n in consumer_side if verdicts[n]["ok"] is False]
    if any("consumer_not_drained" in e for e in verdicts["L1"]["examples"]):
        broken.append("L1 (consumer drain)")
    if broken and not TRIJET_CONSUMERS_REPLICATED:
        pytest.xfail(f"{CONSUMER_GAP}; failed: {', '.join(broken)}")
    assert not broken, {n: verdicts[n.split()[0]] for n in broken}


def trijet_drill(tmp_path: Path, scenario: str, seed: int, **kw: Any) -> dict[str, Any]:
    # without replicated consumers the drain cannot finish and consumer replicas never
    # agree: do not wait long for either
    gap = {} if TRIJET_CONSUMERS_REPLICATED else {"drain_s": 1.0, "agree_s": 1.0}
    base = {"duration": TRIJET_FAULT_S, "quiet_s": 10.0}
    verdicts = drill(tmp_path, scenario, seed, "trijet", **{**base, **gap, **kw})
    history = (tmp_path / scenario / "history.jsonl").read_text().splitlines()
    faults = [r for r in map(json.loads, history) if r.get("type") == "nemesis"]
    assert faults, f"{scenario} seed {seed}: no fault in {base['duration']} s"
    return verdicts


def _fuse(what: str) -> None:
    why = power_unavailable()
    if why is not None:
        pytest.skip(f"{what} needs FUSE: {why}")


@pytest.mark.timeout(90)
def test_trijet_kill_leader(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "kill-leader", 21))


@pytest.mark.timeout(90)
def test_trijet_bounce(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "bounce", 22, duration=6.0))


@pytest.mark.timeout(90)
def test_trijet_pause_leader(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "pause-leader", 23))


@pytest.mark.timeout(90)
def test_trijet_partition_leader(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "partition-leader", 24))


@pytest.mark.timeout(90)
def test_trijet_slow_links(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "slow-links", 25))


@pytest.mark.timeout(90)
def test_trijet_power_loss_all(tmp_path: Path) -> None:
    _fuse("power loss")
    assert_trijet(trijet_drill(tmp_path, "power-loss-all", 27))


@pytest.mark.timeout(90)
def test_trijet_pause_kill(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "pause-kill", 28))


@pytest.mark.timeout(90)
def test_trijet_corrupt_minority(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "corrupt-minority", 29, duration=6.0))


@pytest.mark.timeout(90)
def test_trijet_stepdown(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "stepdown", 30))
