"""Process level: a configuration trijet cannot honour stops it at start.

Operator mode, account subject mappings and JetStream in several accounts in a
cluster would be silently dropped or merged if ignored; the server must exit non-zero
with a clear message on stderr instead, as nats-server does for a bad config.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.servers import REPO_ROOT

EXIT_WAIT_S_MAX = 60.0


def _run(conf: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "node", "-c", str(conf), "-p", "-1", "-a", "127.0.0.1"],
        cwd=str(REPO_ROOT),
        env=env,
        capture_output=True,
        text=True,
        timeout=EXIT_WAIT_S_MAX,
        check=False,
    )


def test_operator_mode_refused_at_start(tmp_path: Path) -> None:
    conf = tmp_path / "server.conf"
    conf.write_text("port: -1\noperator: /nowhere/op.jwt\n")
    done = _run(conf)
    assert done.returncode != 0
    assert f'{conf}:2:1: operator mode is not supported yet: field "operator"' in done.stderr
    assert "Server is ready" not in done.stderr + done.stdout


def test_jetstream_in_two_accounts_refused_in_a_cluster(tmp_path: Path) -> None:
    """JetStream in several accounts runs on one server; a cluster's meta layer keeps one
    account's assignments yet, so a clustered configuration that needs more stops the
    server, and no tenant can see another's streams."""
    conf = tmp_path / "server.conf"
    conf.write_text(
        "port: -1\nserver_name: n1\ncluster { name: C, port: -1 }\n"
        "jetstream: enabled\naccounts {\n"
        "  A: { users: [{user: a, password: a}], jetstream: enabled }\n"
        "  B: { users: [{user: b, password: b}], jetstream: enabled }\n}\n"
    )
    done = _run(conf)
    assert done.returncode != 0
    assert "JetStream in more than one account is not supported in a cluster yet" in done.stderr
    assert "Server is ready" not in done.stderr + done.stdout


def test_account_mappings_refused_at_start(tmp_path: Path) -> None:
    conf = tmp_path / "server.conf"
    conf.write_text("port: -1\naccounts { A: { mappings: { a: b } } }\n")
    done = _run(conf)
    assert done.returncode != 0
    assert 'account subject mappings are not supported yet (account "A")' in done.stderr
