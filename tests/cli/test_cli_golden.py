"""The ``trijet`` client tool against trijet and against nats-server 2.15.1.

Every test runs once per server kind.  Outputs are compared, normalised (see
``clirun``), with the goldens in ``tests/cli/golden`` — the same file for both
kinds, so trijet must answer the public protocol as nats-server does for the
output to match.  Goldens are rewritten from nats-server's answers with
``TRIJET_GOLDEN_UPDATE=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nkeys
import pytest

from tests.cli.clirun import ROOT, check_golden, run_cli
from tests.support.servers import ServerProcess, reference_binary, start_server

KINDS = ["trijet", "reference"]


@pytest.fixture(params=KINDS)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, ServerProcess]]:
    kind = request.param
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    sp = start_server(kind, ["-js", "-sd", str(tmp_path / "js")], workdir=tmp_path)
    try:
        yield kind, sp
    finally:
        sp.stop()


def ok(url: str, *args: str, stdin: str = "") -> tuple[str, str]:
    rc, out, err = run_cli(url, *args, stdin=stdin)
    assert rc == 0, f"trijet {' '.join(args)} -> {rc}\n{out}\n{err}"
    return out, err


def test_seed_workflow(server: tuple[str, ServerProcess]) -> None:
    """The card's four commands, then ls/info/rm, shaped as natscli prints them."""
    kind, sp = server
    url = sp.url
    out, _ = ok(
        url,
        "stream",
        "add",
        "ORDERS",
        "--subjects",
        "orders.>",
        "--storage",
        "file",
        "--retention",
        "limits",
        "--defaults",
    )
    check_golden("stream_add", out, kind)
    _, err = ok(url, "pub", "orders.new", "Order #1001")
    check_golden("pub", err, kind)
    ok(url, "pub", "orders.new", "Order #1002")
    ok(url, "pub", "orders.new", "Order #1003")
    out, _ = ok(
        url,
        "consumer",
        "add",
        "ORDERS",
        "order-processor",
        "--pull",
        "--deliver",
        "all",
        "--ack",
        "explicit",
        "--defaults",
    )
    check_golden("consumer_add", out, kind)
    out, _ = ok(url, "consumer", "next", "ORDERS", "order-processor", "--count", "3", "--ack")
    check_golden("consumer_next", out, kind)

    out, _ = ok(url, "stream", "info", "ORDERS")
    check_golden("stream_info", out, kind)
    out, _ = ok(url, "stream", "ls")
    check_golden("stream_ls", out, kind)
    out, _ = ok(url, "consumer", "ls", "ORDERS")
    check_golden("consumer_ls", out, kind)
    out, _ = ok(url, "consumer", "info", "ORDERS", "order-processor")
    check_golden("consumer_info", out, kind)
    out, _ = ok(url, "stream", "get", "ORDERS", "2")
    check_golden("stream_get", out, kind)

    ok(url, "consumer", "rm", "ORDERS", "order-processor", "-f")
    out, _ = ok(url, "consumer", "ls", "ORDERS")
    assert out == "No Consumers defined\n"
    out, _ = ok(url, "stream", "purge", "ORDERS", "-f")
    check_golden("stream_purge", out, kind)
    ok(url, "stream", "rm", "ORDERS", "-f")
    rc, out, err = run_cli(url, "stream", "info", "ORDERS")
    assert (rc, out) == (1, "")
    check_golden("stream_info_missing", err, kind)
    out, _ = ok(url, "stream", "ls")
    assert out == "No Streams defined\n"


def test_json_for_scripts(server: tuple[str, ServerProcess]) -> None:
    _kind, sp = server
    url = sp.url
    doc = json.loads(ok(url, "stream", "add", "S", "--subjects", "s.*", "--defaults", "--json")[0])
    assert doc["type"] == "io.nats.jetstream.api.v1.stream_create_response"
    assert doc["config"]["subjects"] == ["s.*"] and doc["config"]["storage"] == "file"
    ok(url, "pub", "s.a", "one")
    ok(url, "pub", "s.b", "two")
    assert json.loads(ok(url, "stream", "ls", "--json")[0]) == ["S"]
    info = json.loads(ok(url, "stream", "info", "S", "--json")[0])
    assert info["state"]["messages"] == 2 and info["state"]["last_seq"] == 2
    cons = json.loads(ok(url, "consumer", "add", "S", "C", "--pull", "--defaults", "--json")[0])
    assert cons["name"] == "C" and cons["num_pending"] == 2
    assert json.loads(ok(url, "consumer", "ls", "S", "--json")[0]) == ["C"]
    msg = json.loads(ok(url, "stream", "get", "S", "1", "--json")[0])
    assert msg["subject"] == "s.a" and msg["seq"] == 1
    rc, _, err = run_cli(url, "stream", "add", "S", "--subjects", "other", "--defaults")
    assert rc == 1 and err.startswith("trijet: error: could not create Stream: ")
    assert "(10058)" in err, err  # stream name already in use with a different configuration


def test_prompts_when_flags_are_missing(server: tuple[str, ServerProcess]) -> None:
    """Without --defaults the questions natscli asks are asked, answers read from stdin."""
    kind, sp = server
    answers = "\n".join(
        [
            "P",  # Stream Name
            "p.>",  # Subjects
            "memory",  # Storage
            "1",  # Replication
            "Work Queue",  # Retention Policy
            "New",  # Discard Policy
            "100",  # Stream Messages Limit
            "",  # Per Subject Messages Limit (-1)
            "1MiB",  # Total Stream Size
            "1h",  # Message TTL
            "",  # Max Message Size (-1)
            "",  # Duplicate tracking time window (2m0s)
            "n",  # Allow message Roll-ups
            "y",  # Allow message deletion
            "n",  # Allow purging
        ]
    )
    out, err = ok(sp.url, "stream", "add", stdin=answers + "\n")
    assert "? Stream Name" in err and "? Allow purging subjects or the entire stream" in err
    check_golden("stream_add_prompted", out, kind)
    cfg = json.loads(ok(sp.url, "stream", "info", "P", "--json")[0])["config"]
    assert cfg["storage"] == "memory" and cfg["retention"] == "workqueue"
    assert cfg["discard"] == "new" and cfg["max_msgs"] == 100 and cfg["max_bytes"] == 1 << 20
    assert cfg["max_age"] == 3600 * 10**9 and cfg["deny_purge"] is True
    assert cfg["deny_delete"] is False


def test_kv(server: tuple[str, ServerProcess]) -> None:
    kind, sp = server
    url = sp.url
    out, _ = ok(url, "kv", "add", "CFG", "--history", "5")
    check_golden("kv_add", out, kind)
    assert ok(url, "kv", "put", "CFG", "color", "blue")[0] == "blue\n"
    ok(url, "kv", "put", "CFG", "color", "green")
    ok(url, "kv", "put", "CFG", "size", "XL")
    out, _ = ok(url, "kv", "get", "CFG", "color")
    check_golden("kv_get", out, kind)
    assert ok(url, "kv", "get", "CFG", "color", "--raw")[0] == "green\n"
    assert ok(url, "kv", "ls", "CFG")[0] == "color\nsize\n"
    ok(url, "kv", "del", "CFG", "size", "-f")
    assert ok(url, "kv", "ls", "CFG")[0] == "color\n"
    rc, _, err = run_cli(url, "kv", "get", "CFG", "size")
    assert rc == 1 and "key not found" in err
    out, _ = ok(url, "kv", "history", "CFG", "color")
    check_golden("kv_history", out, kind)
    out, _ = ok(url, "kv", "ls")
    check_golden("kv_ls", out, kind)
    assert json.loads(ok(url, "kv", "ls", "--json")[0]) == ["CFG"]


def test_sub_sees_pub_and_request_reply(server: tuple[str, ServerProcess]) -> None:
    kind, sp = server
    env = {**os.environ, "NATS_URL": sp.url, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "trijet_cli.main"]
    sub = subprocess.Popen(
        [*cmd, "sub", "greet.>", "--count", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    rep = subprocess.Popen(
        [*cmd, "reply", "svc.echo", "pong", "--count", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    try:
        assert sub.stderr is not None and rep.stderr is not None
        assert "Subscribing on greet.>" in sub.stderr.readline()  # subscribed: safe to publish
        ok(sp.url, "pub", "greet.world", "hello")
        out, _ = sub.communicate(timeout=30)
        assert sub.returncode == 0
        check_golden("sub", out, kind)
        # the replier subscribes without saying so (as natscli's): retry until it answers
        deadline = time.monotonic() + 30
        while True:
            rc, out, err = run_cli(sp.url, "request", "svc.echo", "ping", "--timeout", "10")
            if rc == 0 or "no responders" not in err or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # poll interval of a bounded condition in another process
        assert rc == 0, err
        assert out == "\npong\n\n" and "Received with rtt" in err
        rep_out, _ = rep.communicate(timeout=30)
        assert rep.returncode == 0 and "ping" in rep_out
    finally:
        for p in (sub, rep):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_account_info_and_errors(server: tuple[str, ServerProcess]) -> None:
    _kind, sp = server
    ok(sp.url, "stream", "add", "A", "--subjects", "a", "--defaults")
    info = json.loads(ok(sp.url, "account", "info", "--json")[0])
    assert info["streams"] == 1 and info["type"] == "io.nats.jetstream.api.v1.account_info_response"
    out, _ = ok(sp.url, "account", "info")
    assert "JetStream Account Information:" in out and "Streams: 1" in out
    rc, _, err = run_cli("nats://127.0.0.1:1", "stream", "ls", "--timeout", "1")
    assert rc == 1 and err.startswith("trijet: error: setup failed:")


def test_object_store(server: tuple[str, ServerProcess], tmp_path: Path) -> None:
    _kind, sp = server
    url = sp.url
    src = tmp_path / "report.bin"
    src.write_bytes(bytes(range(256)) * 1000)  # 256,000 bytes: two chunks of nats-py's 128 KiB
    out, _ = ok(url, "object", "add", "FILES")
    assert "Information for Object Store Bucket FILES" in out and "Bucket Name: FILES" in out
    out, _ = ok(url, "object", "put", "FILES", str(src))
    assert "Object information for FILES > report.bin" in out
    assert "Size: 250 KiB" in out and "Chunks: 2" in out and "Digest: SHA-256 " in out
    assert json.loads(ok(url, "object", "ls", "FILES", "--json")[0]) == ["report.bin"]
    dest = tmp_path / "copy.bin"
    out, _ = ok(url, "object", "get", "FILES", "report.bin", "-O", str(dest))
    assert out.startswith(f"Wrote: 250 KiB to {dest} in ")
    assert dest.read_bytes() == src.read_bytes()
    out, _ = ok(url, "object", "rm", "FILES", "report.bin", "-f")
    assert out == "Removed FILES > report.bin\n"
    assert ok(url, "object", "ls", "FILES")[0] == "No entries found\n"
    assert json.loads(ok(url, "object", "ls", "--json")[0]) == ["FILES"]


def test_bench_counts_every_message(server: tuple[str, ServerProcess]) -> None:
    _kind, sp = server
    out, _ = ok(
        sp.url, "bench", "bench.x", "--pub", "2", "--sub", "1", "--msgs", "2000", "--size", "64"
    )
    lines = out.splitlines()
    assert lines[0] == "NATS Pub/Sub stats: 2 publishers, 1 subscribers, 2,000 msgs of 64 B"
    assert lines[1].startswith("Pub stats: ") and lines[1].endswith("/sec")
    assert lines[2].startswith(" [1] Sub stats: ")
    ok(sp.url, "stream", "add", "B", "--subjects", "bench.js", "--defaults")
    out, _ = ok(sp.url, "bench", "bench.js", "--js", "--msgs", "200")
    assert out.startswith("NATS JetStream Pub/Sub stats: 1 publishers, 0 subscribers, 200 msgs")
    info = json.loads(ok(sp.url, "stream", "info", "B", "--json")[0])
    assert info["state"]["messages"] == 200  # every benchmark publish was acknowledged and stored


def test_stream_edit_view_report_and_consumer_report(server: tuple[str, ServerProcess]) -> None:
    kind, sp = server
    url = sp.url
    ok(url, "stream", "add", "E", "--subjects", "e.>", "--defaults")
    for i in range(3):
        ok(url, "pub", f"e.{i}", f"msg {i}")
    out, _ = ok(url, "stream", "edit", "E", "--max-msgs", "2", "--description", "edited", "-f")
    check_golden("stream_edit", out, kind)
    cfg = json.loads(ok(url, "stream", "info", "E", "--json")[0])
    assert cfg["config"]["max_msgs"] == 2 and cfg["state"]["messages"] == 2  # the limit applied
    rc, _, err = run_cli(
        url, "stream", "edit", "E", "--max-msgs", "2", "--description", "edited", "-f"
    )
    assert rc == 1 and "no changes made" in err
    out, _ = ok(url, "stream", "view", "E")
    check_golden("stream_view", out, kind)
    ok(url, "consumer", "add", "E", "c1", "--pull", "--defaults")
    ok(url, "consumer", "add", "E", "c2", "--target", "out.c2", "--defaults")
    out, _ = ok(url, "stream", "report")
    check_golden("stream_report", out, kind)
    out, _ = ok(url, "consumer", "report", "E")
    check_golden("consumer_report", out, kind)


def test_kv_watch_sees_updates(server: tuple[str, ServerProcess]) -> None:
    _kind, sp = server
    ok(sp.url, "kv", "add", "W")
    ok(sp.url, "kv", "put", "W", "a", "1")
    env = {**os.environ, "NATS_URL": sp.url, "PYTHONPATH": str(ROOT)}
    w = subprocess.Popen(
        [sys.executable, "-m", "trijet_cli.main", "kv", "watch", "W", "--count", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    try:
        assert w.stdout is not None
        first = w.stdout.readline()  # the current value comes first: the watch is in place
        assert first.endswith("PUT W > a: 1\n"), first
        ok(sp.url, "kv", "put", "W", "b", "2")
        ok(sp.url, "kv", "del", "W", "a", "-f")
        rest, err = w.communicate(timeout=30)
        assert w.returncode == 0, err
        lines = rest.splitlines()
        assert lines[0].endswith("PUT W > b: 2") and lines[1].endswith("DEL W > a"), rest
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


@pytest.mark.parametrize("kind", KINDS)
def test_user_password_and_nats_url(kind: str, tmp_path: Path) -> None:
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    conf = "authorization {\n  user: ops\n  password: s3cret\n}\n"
    sp = start_server(kind, ["-js", "-sd", str(tmp_path / "js")], config=conf, workdir=tmp_path)
    try:
        rc, _, err = run_cli(sp.url, "stream", "ls")
        assert rc == 1 and err.startswith("trijet: error: setup failed:"), err
        rc, _, err = run_cli(sp.url, "--user", "ops", "--password", "wrong", "stream", "ls")
        assert rc == 1 and "authorization violation" in err.lower(), err
        assert ok(sp.url, "--user", "ops", "--password", "s3cret", "stream", "ls")[0] == (
            "No Streams defined\n"
        )
        host_port = sp.url.removeprefix("nats://")
        url = f"nats://ops:s3cret@{host_port}"  # credentials in NATS_URL, as nats tools take them
        assert ok(url, "stream", "ls")[0] == "No Streams defined\n"
    finally:
        sp.stop()


def test_consumer_prompts_and_confirmations(server: tuple[str, ServerProcess]) -> None:
    kind, sp = server
    url = sp.url
    ok(url, "stream", "add", "Q", "--subjects", "q.>", "--defaults")
    answers = "\n".join(
        [
            "worker",  # Consumer name
            "",  # Delivery target (empty for Pull Consumers)
            "all",  # Start policy
            "explicit",  # Acknowledgment policy
            "instant",  # Replay policy
            "q.jobs",  # Filter Stream by subjects
            "5",  # Maximum Allowed Deliveries
            "10",  # Maximum Acknowledgments Pending
            "n",  # Deliver headers only without bodies
        ]
    )
    out, err = ok(url, "consumer", "add", "Q", stdin=answers + "\n")
    assert "? Consumer name" in err and "? Deliver headers only without bodies" in err
    check_golden("consumer_add_prompted", out, kind)
    cfg = json.loads(ok(url, "consumer", "info", "Q", "worker", "--json")[0])["config"]
    assert cfg["filter_subject"] == "q.jobs" and cfg["max_deliver"] == 5
    assert cfg["max_ack_pending"] == 10 and cfg["ack_policy"] == "explicit"
    # confirmations: "n" keeps the assets, "y" removes them
    assert ok(url, "consumer", "rm", "Q", "worker", stdin="n\n")[0] == ""
    assert json.loads(ok(url, "consumer", "ls", "Q", "--json")[0]) == ["worker"]
    ok(url, "consumer", "rm", "Q", "worker", stdin="y\n")
    assert json.loads(ok(url, "consumer", "ls", "Q", "--json")[0]) is None
    ok(url, "stream", "rm", "Q", stdin="n\n")
    assert json.loads(ok(url, "stream", "ls", "--json")[0]) == ["Q"]
    _, err = ok(url, "stream", "rm", "Q", stdin="y\n")
    assert "? Really delete Stream Q" in err
    assert json.loads(ok(url, "stream", "ls", "--json")[0]) is None


@pytest.mark.parametrize("kind", KINDS)
def test_nkey_seed_file(kind: str, tmp_path: Path) -> None:
    if kind == "reference" and reference_binary() is None:
        pytest.skip("reference nats-server not installed")
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(seed + b"\n")
    conf = f"authorization {{\n  users: [ {{ nkey: {public} }} ]\n}}\n"
    sp = start_server(kind, ["-js", "-sd", str(tmp_path / "js")], config=conf, workdir=tmp_path)
    try:
        rc, _, err = run_cli(sp.url, "stream", "ls")
        assert rc == 1 and err.startswith("trijet: error: setup failed:"), err
        assert ok(sp.url, "--nkey", str(seed_file), "stream", "ls")[0] == "No Streams defined\n"
    finally:
        sp.stop()
