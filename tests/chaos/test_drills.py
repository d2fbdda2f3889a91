"""Short failover drills against real three-node clusters: nats-server 2.15.1 and trijet.

Each drill is ``python -m chaos run`` in miniature (a few seconds of faults, seeded, printed with
its replay command) and asserts the checkers' verdicts where the target is known to hold them:
nats-server with ``sync_interval: always``, every fault family the harness was proven on;
trijet (R3 streams and their consumers through the streams' Raft groups; R2 for peer-remove),
every fault family it holds today (F1 F2 F3 F4 F5 F7 F8 F9 F13 stepdown, peer-remove and
scale-churn; F6 is
F7 on one node, left to the campaign; not F11 disk-full: a write error ends the node's stream
groups until restart): the stream side (S1-S7, S3 replica agreement, W2, KV), the consumer side
(C1-C6) and L1.

To keep CI near three minutes, fault families that share the same assertions run as one drill:
a composite scenario (``kill-leader+stepdown+…``, ``chaos.nemesis.scenario_of``) gives each part
an equal share of the fault phase and heals after each, so one start, setup, quiet and read
serve several families; every part must have injected at least one fault (``assert_parts``).
trijet's pause and slow-link families (F3, F8, F5) still run alone: composed into a longer drill
they made C2 flag redeliveries that arrived more than ``RACE_S`` after an AckSync, held up in a
paused server or on slow links (the history cannot tell when they were decided; see the
branch's report).  On nats-server, corruption and disk full (whose checks are the same: what
was read holds, nothing acknowledged missing from a majority) share one drill.  Only the first
drill writes the HTML report.  A drill's fixed costs (start, setup, quiet) are kept short by the
harness itself: streams created concurrently, quiet polled every 0.25 s, FUSE helpers mounted
together.  ``TRIJET_CONSUMERS_REPLICATED`` turns the consumer side into expected
failures (for a build whose consumers do not replicate).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chaos.nemesis import SCENARIOS
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
    report = kw.pop("report", False)
    cfg = RunConfig(
        scenario, target, seed, kw.pop("duration", FAULT_S), tmp_path / "run",
        sync_always=kw.pop("sync_always", True), rate_per_s=25.0,
        quiet_s=kw.pop("quiet_s", 15.0), drain_s=kw.pop("drain_s", 10.0),
        agree_s=kw.pop("agree_s", None), report=report,
    )  # fmt: skip
    result = run(cfg)
    verdicts = {v["name"]: v for v in result["verdicts"]}
    for v in verdicts.values():
        if v["ok"] is not True:
            print(v["name"], v["ok"], v["bad"], v["examples"][:2], v["detail"])
    assert (cfg.out / "report.html").exists() == report
    assert result["ops"]["publish"]["ok"] > 0
    assert_parts(cfg.out, scenario, seed)
    return verdicts


def assert_parts(out: Path, scenario: str, seed: int) -> None:
    """Every part of the (composite) scenario injected at least one fault."""
    records = [json.loads(x) for x in (out / "history.jsonl").read_text().splitlines()]
    parts: list[str] = []
    faults: dict[str, int] = {}
    for r in records:
        if r.get("type") == "part":
            parts.append(r["scenario"])
            faults[r["scenario"]] = 0
        elif r.get("type") == "nemesis" and r.get("phase") == "start":
            key = parts[-1] if parts else scenario
            faults[key] = faults.get(key, 0) + 1
    if not parts:
        faults = {scenario: faults.get(scenario, 0)}
    idle = [p for p, n in faults.items() if n == 0]
    assert not idle, f"{scenario} seed {seed}: no fault injected by {idle}"


def assert_hold(verdicts: dict[str, dict[str, Any]], names: tuple[str, ...]) -> None:
    broken = {n: verdicts[n] for n in names if verdicts[n]["ok"] is not True}
    assert not broken, broken


def _with_power(parts: str) -> str:
    """``parts`` without those that need FUSE (power loss, disk full) when it is not
    available here."""
    if power_unavailable() is None:
        return parts
    return "+".join(p for p in parts.split("+") if not SCENARIOS[p].needs_power)


@pytest.mark.timeout(120)
def test_kill_stepdown_slow_links(tmp_path: Path) -> None:
    v = drill(tmp_path, "kill-leader+stepdown+slow-links", 11, duration=9.0, report=True)
    assert_hold(v, (*SAFETY, "C1", "C3", "L1"))


@pytest.mark.timeout(120)
def test_pause_partition_power_loss_one(tmp_path: Path) -> None:
    v = drill(tmp_path, _with_power("pause-leader+partition-leader+power-loss-one"), 12,
              duration=9.0)  # fmt: skip
    assert_hold(v, (*SAFETY, "L1"))


@pytest.mark.timeout(120)
def test_corrupt_minority_disk_full(tmp_path: Path) -> None:
    # nats-server 2.15.1 disables JetStream on a write error and keeps it off after space
    # returns, so the cluster does not converge (L1, S3; the quiet and drain waits are short);
    # the corrupted or full follower may lose or refuse data: what was read must hold, and no
    # acknowledged write may be missing from a majority of the replicas read
    v = drill(tmp_path, _with_power("corrupt-minority+disk-full"), 16, duration=8.0,
              quiet_s=2.0, drain_s=3.0, agree_s=1.0)  # fmt: skip
    assert_hold(v, ("S2", "S5", "S6", "S7", "W2"))
    s1 = v["S1"]["detail"]
    assert s1["lost_on_majority"] == 0 and "unknown" not in s1, s1


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
    return drill(tmp_path, scenario, seed, "trijet", **{**base, **gap, **kw})


@pytest.mark.timeout(120)
def test_trijet_kill_partition_stepdown(tmp_path: Path) -> None:
    scenario = "kill-leader+partition-leader+stepdown"
    assert_trijet(trijet_drill(tmp_path, scenario, 21, duration=9.0))


# the pause and slow-link families run alone, as short as before: composed with the others
# they made C2 flag redeliveries that arrived more than RACE_S after an AckSync (held up in a
# paused server or on 100-150 ms links; the checker cannot see when they were decided)
@pytest.mark.timeout(90)
def test_trijet_slow_links(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "slow-links", 25))


@pytest.mark.timeout(90)
def test_trijet_pause_leader(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "pause-leader", 23))


@pytest.mark.timeout(90)
def test_trijet_pause_kill(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "pause-kill", 28))


@pytest.mark.timeout(120)
def test_trijet_bounce_power_loss_corrupt_minority(tmp_path: Path) -> None:
    scenario = _with_power("bounce+power-loss-all+corrupt-minority")
    assert_trijet(trijet_drill(tmp_path, scenario, 22, duration=9.0))


@pytest.mark.timeout(90)
def test_trijet_peer_remove(tmp_path: Path) -> None:
    assert_trijet(trijet_drill(tmp_path, "peer-remove", 31))


@pytest.mark.timeout(90)
def test_trijet_scale_churn(tmp_path: Path) -> None:
    """F13: LOG scaled R3 → R1 → R3 through STREAM.UPDATE while the workloads run."""
    assert_trijet(trijet_drill(tmp_path, "scale-churn", 32, duration=6.0))
