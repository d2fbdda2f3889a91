"""``trijet server report jetstream`` (and stream info's cluster section) on three-node clusters.

With a system-account user the report comes from ``$SYS.REQ.SERVER.PING.JSZ``, as
natscli's does (checked on nats-server, which implements those requests).  Without
one it is built from the JetStream API alone, which every server answers: then
trijet's and nats-server's reports must match.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.clirun import check_golden, normalise, run_cli
from tests.support.cluster import Cluster, start_cluster
from tests.support.servers import reference_binary

SYS_CONF = """
accounts {
  SYS: { users: [ { user: sys, password: sys } ] }
  APP: { jetstream: enabled, users: [ { user: app, password: app } ] }
}
system_account: SYS
"""
CURRENT_S_MAX = 30.0


def ok(url: str, *args: str) -> str:
    rc, out, err = run_cli(url, *args)
    assert rc == 0, f"trijet {' '.join(args)} -> {rc}\n{out}\n{err}"
    return out


def _setup_r3(url: str, *auth: str) -> None:
    ok(
        url,
        *auth,
        "stream",
        "add",
        "ORDERS",
        "--subjects",
        "orders.>",
        "--replicas",
        "3",
        "--defaults",
    )
    for i in range(5):
        ok(url, *auth, "pub", "orders.new", f"Order #{i}")
    ok(url, *auth, "consumer", "add", "ORDERS", "proc", "--pull", "--defaults", "--replicas", "3")


def _placement_free(text: str) -> str:
    """Which node leads and the group's random name differ from run to run: mask them."""
    text = re.sub(r"(Cluster Group|Raft Group): [SC]-R3F-\w+", r"\1: <GROUP>", text)
    text = re.sub(r"(Leader|Replica): n\d", r"\1: <NODE>", text)
    return text


def _when_replicas_current(url: str, *args: str) -> str:
    """The command's output once it shows both replicas current (a loaded machine may lag)."""
    deadline = time.monotonic() + CURRENT_S_MAX
    while True:
        out = ok(url, *args)
        if out.count(", current, seen ") == 2 or time.monotonic() > deadline:
            return out
        time.sleep(0.2)  # poll interval of a bounded condition in other processes


def _report_when_current(url: str, *auth: str) -> str:
    deadline = time.monotonic() + CURRENT_S_MAX
    while True:
        out = ok(url, *auth, "server", "report", "jetstream", "--timeout", "1")
        if "All stream and consumer replicas are current" in out or time.monotonic() > deadline:
            return out
        time.sleep(0.2)  # poll interval of a bounded condition in other processes


@pytest.fixture(params=["trijet", "reference"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Cluster]]:
    if request.param == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    with start_cluster(request.param, workdir=tmp_path) as c:
        yield request.param, c


def test_report_from_jetstream_api(cluster: tuple[str, Cluster]) -> None:
    kind, c = cluster
    url = c.urls[0]
    _setup_r3(url)
    out = _report_when_current(url)
    want = "\n".join(
        [
            "╭─╮",
            "│ JetStream Summary │",
            "├─┬─┬─┬─┬─┬─┬─┬─┬─┬─┤",
            "│ Server │ Cluster │ Streams │ Consumers │ Messages │ Bytes │ Memory │ File │ API Req │ Pending │",
            "├─┼─┼─┼─┼─┼─┼─┼─┼─┼─┤",
            "│ n1 │ │ 1 │ 1 │ 5 │ 240 B │ 0 B │ 240 B │ - │ 0 │",
            "│ n2 │ │ 1 │ 1 │ 5 │ 240 B │ 0 B │ 240 B │ - │ 0 │",
            "│ n3 │ │ 1 │ 1 │ 5 │ 240 B │ 0 B │ 240 B │ - │ 0 │",
            "├─┼─┼─┼─┼─┼─┼─┼─┼─┼─┤",
            "│ │ │ 3 │ 3 │ 15 │ 720 B │ 0 B │ 720 B │ - │ 0 │",
            "╰─┴─┴─┴─┴─┴─┴─┴─┴─┴─╯",
            "",
            "Meta leader: unknown (no server answered $SYS.REQ.SERVER.PING.JSZ; use a system account user)",
            "All stream and consumer replicas are current",
            "",
        ]
    )
    assert normalise(out) == want, f"{kind}:\n{out}"
    # R3 stream and consumer info: the same report from both servers, placement aside
    stream_info = _when_replicas_current(url, "stream", "info", "ORDERS")
    check_golden("stream_info_r3", _placement_free(stream_info), kind)
    consumer_info = _when_replicas_current(url, "consumer", "info", "ORDERS", "proc")
    check_golden("consumer_info_r3", _placement_free(consumer_info), kind)


def test_report_from_system_account(tmp_path: Path) -> None:
    if reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    with start_cluster("reference", workdir=tmp_path, extra_conf=SYS_CONF) as c:
        url = c.urls[0]
        _setup_r3(url, "--user", "app", "--password", "app")
        out = ok(url, "--user", "sys", "--password", "sys", "server", "report", "jetstream")
        listing = ok(url, "--user", "sys", "--password", "sys", "server", "list")
        pong = ok(url, "--user", "sys", "--password", "sys", "server", "ping")
        rc, _out_sd, err_sd = run_cli(
            url, "--user", "sys", "--password", "sys", "server", "raft", "step-down"
        )
    assert rc == 0, err_sd
    first, second = err_sd.splitlines()[-2:]
    old_leader = first.split('"')[1]
    assert first.endswith(f'Requesting leader step down of "{old_leader}" in a 3 peer RAFT group')
    assert "New leader elected" in second and f'"{old_leader}"' not in second, err_sd
    assert [ln.split("│")[1].strip() for ln in listing.splitlines() if ln.startswith("│ n")] == [
        "n1",
        "n2",
        "n3",
    ], listing
    assert pong.splitlines()[-1].startswith("3 replies max: "), pong
    lines = out.splitlines()
    rows = [ln for ln in lines if ln.startswith("│ n")]
    assert len(rows) == 6, out  # three servers, then three meta group peers
    summary, meta = rows[:3], rows[3:]
    assert sum("*" in r.split("│")[1] for r in summary) == 1, out  # one meta leader
    assert all(r.split("│")[3].strip() == "1" for r in summary), out  # the R3 stream on each
    assert "RAFT Meta Group Information - Lead cluster: C1" in out
    assert sum(r.split("│")[3].strip() == "yes" for r in meta) == 1
    assert all(r.split("│")[4].strip() == "true" for r in meta), out  # all current
