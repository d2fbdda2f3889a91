"""deploy/: ``docker compose`` validation and a real three-node compose run.

``test_compose_config_valid`` asks ``docker compose config`` (no engine needed)
to validate deploy/compose.yaml, alone and with the CI overlay, and checks the
shape the issue asks for: three nodes, named volumes, healthchecks on
``/healthz``, ports published on 127.0.0.1 only, node configs under deploy/.

``test_compose_cluster_r3_survives_kill`` is the CI drill (about two minutes on a
fresh machine, mostly the image build): engine up (started by hand when none
runs, stopped by its PID after), base image ``localhost/debian-base``,
``docker compose build``, ``up -d --wait``, an R3 stream through nats-py on the
published ports, ``docker compose kill n2`` while publishing (every publish is
retried with its ``Nats-Msg-Id`` until acknowledged), ``start n2``, catch-up
checked in n2's own store (its ``/jsz``), every acknowledged message read back
exactly once, ``down -v``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.cli.clirun import run_cli
from tests.deploy import docker_engine
from tests.support.aio import noop_cb, run
from tests.support.cluster import reserve_ports

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NODES = ("n1", "n2", "n3")
UP_S_MAX = 180.0
BUILD_S_MAX = 600.0
CATCH_UP_S_MAX = 60.0
REQUEST_TIMEOUT_S = 2.0
READ_BACK_TIMEOUT_S = 10.0
STOP_S_MAX = 8.0
IMAGE_LABEL = "org.opencontainers.image.title=trijet"
STREAM = "ORDERS"
BEFORE_KILL = 150
DURING_KILL = 150


def _compose(
    project: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    cmd = ["docker", "compose", "-p", project, "-f", "compose.yaml", "-f", "compose.ci.yaml"]
    proc = subprocess.run(
        [*cmd, *args],
        cwd=DEPLOY,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"docker compose {' '.join(args)} failed ({proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def test_compose_config_valid() -> None:
    if (
        shutil.which("docker") is None
        or subprocess.run(["docker", "compose", "version"], capture_output=True).returncode
    ):
        docker_engine.require_or_skip()
    out = subprocess.run(
        ["docker", "compose", "-f", "compose.yaml", "config", "--format", "json"],
        cwd=DEPLOY,
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("N1_", "N2_", "N3_"))},
    )
    doc = json.loads(out.stdout)
    assert sorted(doc["services"]) == list(NODES)
    assert sorted(doc["volumes"]) == ["n1-data", "n2-data", "n3-data"]
    for i, name in enumerate(NODES):
        svc = doc["services"][name]
        assert svc["build"]["args"]["BASE"] == "python:3.12-slim"
        assert "/healthz" in " ".join(svc["healthcheck"]["test"])
        published = sorted((p["target"], p["host_ip"], p["published"]) for p in svc["ports"])
        assert published == [
            (4222, "127.0.0.1", str(4222 + i)),
            (8222, "127.0.0.1", str(8222 + i)),
        ]
        mounts = {m["target"]: m for m in svc["volumes"]}
        assert mounts["/data"]["type"] == "volume" and mounts["/data"]["source"] == f"{name}-data"
        conf = mounts["/etc/trijet/trijet.conf"]
        assert conf["type"] == "bind" and conf["read_only"]
        assert Path(conf["source"]) == DEPLOY / f"{name}.conf"
        text = (DEPLOY / f"{name}.conf").read_text()
        assert f"server_name: {name}" in text and "server_tags:" in text
    ci = subprocess.run(
        ["docker", "compose", "-f", "compose.yaml", "-f", "compose.ci.yaml", "config", "-q"],
        cwd=DEPLOY,
        capture_output=True,
        text=True,
    )
    assert ci.returncode == 0, ci.stderr


def test_node_configs_load() -> None:
    """Every conf file in deploy/ is one trijet-server accepts (``-t``), with no warnings."""
    from node.config import ConfigExit, load

    for conf in sorted(DEPLOY.glob("*.conf")):
        with pytest.raises(ConfigExit) as ex:
            load(["-c", str(conf), "-t"])
        assert ex.value.code == 0, (conf, ex.value.text)


def _get_json(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_S) as resp:
            doc = json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return doc if isinstance(doc, dict) else None


def _local_state(monitor_url: str, stream: str) -> dict[str, Any] | None:
    doc = _get_json(f"{monitor_url}/jsz?streams=true")
    for acc in (doc or {}).get("account_details") or []:
        for s in acc.get("stream_detail") or []:
            if s["name"] == stream:
                return dict(s["state"])
    return None


@pytest.fixture(scope="module")
def compose_project() -> Iterator[tuple[str, dict[str, str]]]:
    docker_engine.require_or_skip()
    with docker_engine.engine():
        docker_engine.ensure_base_image()
        project = f"trijet-ci-{os.getpid()}"
        socks = reserve_ports(6)
        ports = [s.getsockname()[1] for s in socks]
        env = {"BASE": docker_engine.BASE_IMAGE}
        for i, name in enumerate(NODES):
            env[f"{name.upper()}_CLIENT_PORT"] = str(ports[i])
            env[f"{name.upper()}_MONITOR_PORT"] = str(ports[3 + i])
        try:
            _compose(project, "build", env=env, timeout=BUILD_S_MAX)
            for s in socks:
                s.close()
            _compose(project, "up", "-d", "--wait", env=env, timeout=UP_S_MAX)
            yield project, env
        finally:
            for s in socks:
                s.close()
            logs = subprocess.run(
                ["docker", "compose", "-p", project, "logs", "--no-color", "--tail", "60"],
                cwd=DEPLOY,
                capture_output=True,
                text=True,
            )
            print(logs.stdout[-8000:])
            subprocess.run(
                [
                    "docker",
                    "compose",
                    "-p",
                    project,
                    "-f",
                    "compose.yaml",
                    "-f",
                    "compose.ci.yaml",
                    "down",
                    "-v",
                    "--timeout",
                    "10",
                ],
                cwd=DEPLOY,
                env={**os.environ, **env},
                capture_output=True,
                timeout=120,
            )
            # images left dangling by rebuilds of this Dockerfile (and only those)
            subprocess.run(
                ["docker", "image", "prune", "-f", "--filter", f"label={IMAGE_LABEL}"],
                capture_output=True,
                timeout=120,
            )


async def _publish_retrying(js: Any, subject: str, data: bytes, msg_id: str) -> int:
    """Publish with a msg id until acknowledged (bounded): the stream sequence."""
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        try:
            ack = await js.publish(subject, data, headers={"Nats-Msg-Id": msg_id})
            return int(ack.seq)
        except (
            nats.errors.TimeoutError,
            nats.errors.NoRespondersError,
            nats.js.errors.NoStreamResponseError,
            nats.js.errors.ServiceUnavailableError,
        ):
            await asyncio.sleep(0.05)  # back-off between retries, not a wait for a condition
    raise AssertionError(f"{msg_id} never acknowledged")


@pytest.mark.timeout(900)
def test_compose_cluster_r3_survives_kill(compose_project: tuple[str, dict[str, str]]) -> None:
    project, env = compose_project
    urls = [f"nats://127.0.0.1:{env[f'{n.upper()}_CLIENT_PORT']}" for n in NODES]
    monitors = [f"http://127.0.0.1:{env[f'{n.upper()}_MONITOR_PORT']}" for n in NODES]
    acked: dict[str, int] = {}

    async def body() -> None:
        # n1 and n3 only: n2 is the one killed, and the client must not depend on it
        nc = await nats.connect(
            [urls[0], urls[2]], error_cb=noop_cb, max_reconnect_attempts=-1, reconnect_time_wait=0.2
        )
        try:
            js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
            info = await js.add_stream(
                name=STREAM, subjects=["orders.>"], num_replicas=3, storage="file"
            )
            assert info.config.num_replicas == 3
            assert {info.cluster.leader, *(r.name for r in info.cluster.replicas)} == set(NODES)
            for i in range(BEFORE_KILL):
                acked[f"m{i}"] = await _publish_retrying(js, "orders.new", b"m%d" % i, f"m{i}")
            kill = asyncio.get_running_loop().run_in_executor(
                None, lambda: _compose(project, "kill", "n2", env=env)
            )
            # keep publishing while the kill is under way (and at least DURING_KILL more)
            i = BEFORE_KILL
            while not kill.done() or i < BEFORE_KILL + DURING_KILL:
                acked[f"m{i}"] = await _publish_retrying(js, "orders.new", b"m%d" % i, f"m{i}")
                i += 1
            await kill
            ps = _compose(project, "ps", "--format", "json", "n2", env=env).stdout.strip()
            assert '"running"' not in ps, ps  # n2 is down now
            # more acknowledged writes with n2 certainly gone
            for j in range(i, i + 50):
                acked[f"m{j}"] = await _publish_retrying(js, "orders.new", b"m%d" % j, f"m{j}")
            si = await js.stream_info(STREAM)
            assert si.state.messages == len(acked)
        finally:
            await nc.close()

    run(body, timeout=240.0)
    seqs = sorted(acked.values())
    assert seqs == list(range(1, len(acked) + 1)), "an acknowledged sequence is missing or twice"

    _compose(project, "start", "n2", env=env)
    deadline = time.monotonic() + CATCH_UP_S_MAX
    while True:
        states = [_local_state(m, STREAM) for m in monitors]
        if all(s is not None and s["messages"] == len(acked) for s in states) and (
            len({(s["first_seq"], s["last_seq"]) for s in states if s}) == 1
        ):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"n2 did not catch up: {states}")
        time.sleep(0.2)  # poll interval of a bounded condition in another process

    async def read_back() -> None:
        # through n2 itself, now that it is back: every acknowledged message, once, in order
        nc = await nats.connect(urls[1], error_cb=noop_cb)
        try:
            # a node just restarted on a loaded machine may answer slowly: wait longer, retry
            js = nc.jetstream(timeout=READ_BACK_TIMEOUT_S)
            sub = None
            deadline = time.monotonic() + CATCH_UP_S_MAX
            while sub is None:
                try:
                    sub = await js.pull_subscribe("orders.>", durable="audit", stream=STREAM)
                except nats.errors.TimeoutError:
                    if time.monotonic() > deadline:
                        raise
            got: list[tuple[int, bytes]] = []
            while len(got) < len(acked):
                for m in await sub.fetch(100, timeout=5.0):
                    got.append((m.metadata.sequence.stream, m.data))
                    await m.ack()
            assert [s for s, _ in got] == seqs
            assert {d.decode() for _, d in got} == set(acked)
            assert all(acked[d.decode()] == s for s, d in got)
        finally:
            await nc.close()

    run(read_back, timeout=60.0)

    # n2's own Prometheus view of its replica (node/monitor/metrics.py)
    with urllib.request.urlopen(f"{monitors[1]}/metrics", timeout=REQUEST_TIMEOUT_S) as resp:
        text = resp.read().decode()
    samples = {
        (s.name, s.labels.get("stream_name"), s.labels.get("consumer_name")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    assert samples[("jetstream_stream_total_messages", STREAM, None)] == len(acked)
    assert samples[("trijet_raft_group_size", STREAM, "")] == 3

    # the trijet CLI against the deployed cluster: every node holds the stream, replicas current
    deadline = time.monotonic() + CATCH_UP_S_MAX
    while True:
        rc, out, err = run_cli(urls[0], "server", "report", "jetstream", "--timeout", "1")
        assert rc == 0, err
        if "All stream and consumer replicas are current" in out:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"replicas not current per trijet server report:\n{out}")
        time.sleep(0.2)  # poll interval of a bounded condition in another process
    rows = [ln for ln in out.splitlines() if ln.startswith("│ n")]
    assert [r.split("│")[1].strip() for r in rows] == list(NODES), out
    msgs = [r.split("│")[5].strip() for r in rows]
    assert msgs == [f"{len(acked):,}"] * 3, f"{len(acked)} acknowledged; report:\n{out}"

    # the image runs trijet-server as its own non-root user, and it exits on SIGTERM: a stop
    # finishes well inside stop_grace_period (10 s), after which docker would SIGKILL
    names = _compose(project, "exec", "-T", "n3", "trijet", "stream", "ls", "--names", env=env)
    assert names.stdout == f"{STREAM}\n", names.stdout  # the client command inside the image
    uid = _compose(project, "exec", "-T", "n1", "id", "-u", env=env).stdout.strip()
    assert uid not in ("", "0"), uid
    started = time.monotonic()
    _compose(project, "stop", env=env)
    stop_s = time.monotonic() - started
    assert stop_s < STOP_S_MAX, f"docker compose stop took {stop_s:.1f}s"


DEPLOY_CONF_KEYS = {
    "server_name",
    "server_tags",
    "listen",
    "http",
    "jetstream",
    "jetstream.store_dir",
    "cluster",
    "cluster.name",
    "cluster.listen",
    "cluster.no_advertise",
    "cluster.routes",
}


def _conf_keys(text: str) -> set[str]:
    """Dotted keys set by a nats-server-format conf (blocks one level deep, as deploy/ uses)."""
    keys: set[str] = set()
    block = ""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        stripped = line.strip()
        if not stripped or stripped in ("]", "}") or stripped.startswith("nats-route://"):
            if stripped == "}":
                block = ""
            continue
        if not raw.startswith(" "):
            block = ""
        name = stripped.split(":")[0].split("{")[0].split()[0]
        keys.add(f"{block}.{name}" if block else name)
        if line.endswith("{"):
            block = name
    return keys


def test_node_configs_set_no_defaults() -> None:
    """deploy/ sets identity, addresses and paths only: every tunable keeps node/config.py's default."""
    assert _conf_keys("max_payload: 1\njetstream {\n  max_mem: 1G\n}\n") == {
        "max_payload",
        "jetstream",
        "jetstream.max_mem",
    }
    for conf in sorted(DEPLOY.glob("*.conf")):
        keys = _conf_keys(conf.read_text())
        assert keys <= DEPLOY_CONF_KEYS, (conf.name, sorted(keys - DEPLOY_CONF_KEYS))
        assert {"server_name", "listen", "http", "jetstream.store_dir"} <= keys, conf.name
