"""Process level: a configuration trijet cannot honour stops it at start.

``accounts`` (and the keys that name or imply accounts) would be silently
merged into one account if ignored; the server must exit non-zero with a
clear message on stderr instead, as nats-server does for a bad config.
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


def test_accounts_block_refused_at_start(tmp_path: Path) -> None:
    conf = tmp_path / "server.conf"
    conf.write_text(
        "accounts {\n  A: { users: [{user: a, password: a}] }\n"
        "  B: { users: [{user: b, password: b}] }\n}\n"
    )
    done = _run(conf)
    assert done.returncode != 0
    assert f"{conf}:1:1: accounts are not supported yet" in done.stderr, done.stderr
    assert "multi-account isolation is tracked separately" in done.stderr
    assert "Server is ready" not in done.stderr + done.stdout


def test_system_account_refused_at_start(tmp_path: Path) -> None:
    conf = tmp_path / "server.conf"
    conf.write_text("port: -1\nsystem_account: SYS\n")
    done = _run(conf)
    assert done.returncode != 0
    assert f'{conf}:2:1: accounts are not supported yet: field "system_account"' in done.stderr
