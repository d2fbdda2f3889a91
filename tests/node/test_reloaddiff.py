"""``node.reloaddiff``: which changes a reload applies and which it refuses, in nats-server's
words (texts checked against nats-server 2.15.1's log), and ``node.config.reread``."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.config import ConfigError, load, reread
from node.reloaddiff import ReloadRefused, diff, friendly_bytes, go_duration

BASE = """
server_name: s1
listen: 127.0.0.1:-1
jetstream { store_dir: "%(dir)s/js", max_file_store: 1G }
accounts {
  A: { users: [{user: a, password: a}], jetstream: {max_streams: 1} }
  SYS: { users: [{user: sys, password: sys}] }
}
system_account: SYS
"""


AUTH = ["Reloaded: authorization users", "Reloaded: accounts"]


def _cfgs(tmp_path: Path, edit: str = "", replace: tuple[str, str] = ("", "")) -> tuple:
    path = tmp_path / "s.conf"
    text = BASE % {"dir": tmp_path}
    path.write_text(text)
    old = load(["-c", str(path), "-p", "-1"])
    path.write_text(text.replace(*replace) + edit)
    return old, reread(old)


def test_nothing_changed_is_an_empty_plan(tmp_path: Path) -> None:
    old, new = _cfgs(tmp_path)
    plan = diff(old, new)
    # nats-server reloads users and accounts on every reload, changed or not
    assert plan.notices == AUTH and plan.auth and not plan.logging


def test_applied_changes_and_their_notices(tmp_path: Path) -> None:
    old, new = _cfgs(
        tmp_path,
        'max_payload: 2048\ndebug: true\nping_interval: "30s"\n',
        ("max_streams: 1", "max_streams: 2"),
    )
    plan = diff(old, new)
    assert plan.notices == [
        "Reloaded: max_payload = 2048",
        "Reloaded: ping_interval = 30s",
        "Reloaded: debug = true",
        *AUTH,
    ]
    assert plan.max_payload and plan.logging and plan.auth


def test_flags_still_win_over_the_file(tmp_path: Path) -> None:
    old, new = _cfgs(tmp_path, replace=("listen: 127.0.0.1:-1", "listen: 127.0.0.1:4999"))
    assert new.port == -1  # -p -1 from the command line
    assert diff(old, new).notices == AUTH


@pytest.mark.parametrize(
    ("edit", "replace", "text"),
    [
        (
            "",
            ("server_name: s1", "server_name: s2"),
            "config reload not supported for ServerName: old=s1, new=s2",
        ),
        (
            "max_pending: 2MB\n",
            ("", ""),
            "config reload not supported for MaxPending: old=67108864, new=2097152",
        ),
        ("", ('/js"', '/js2"'), "config reload not supported for jetstream storage directory"),
        (
            "",
            ("max_file_store: 1G", "max_file_store: 1M"),
            "config reload not supported for decreasing jetstream max memory and store",
        ),
        (
            "",
            ("system_account: SYS", "system_account: A"),
            "config reload not supported for SystemAccount: old=SYS, new=A",
        ),
    ],
)
def test_refused_changes(tmp_path: Path, edit: str, replace: tuple[str, str], text: str) -> None:
    old, new = _cfgs(tmp_path, edit, replace)
    with pytest.raises(ReloadRefused) as exc:
        diff(old, new)
    assert str(exc.value) == text


def test_raised_store_limit_applies(tmp_path: Path) -> None:
    old, new = _cfgs(tmp_path, replace=("max_file_store: 1G", "max_file_store: 2GB"))
    plan = diff(old, new)
    assert plan.js_store == (None, 2 * 1024**3)
    assert plan.notices == ["Reloaded: JetStream max_file_store = 2.00 GB", *AUTH]


def test_broken_file_is_a_config_error(tmp_path: Path) -> None:
    old, _ = _cfgs(tmp_path)
    (tmp_path / "s.conf").write_text("accounts {{{\n")
    with pytest.raises(ConfigError):
        reread(old)


def test_no_file_cannot_reload() -> None:
    with pytest.raises(ConfigError, match="can only reload config when a file is provided"):
        reread(load(["-p", "-1"]))


def test_go_texts() -> None:
    assert go_duration(120) == "2m0s"
    assert go_duration(0.5) == "500ms"
    assert go_duration(3661) == "1h1m1s"
    assert friendly_bytes(512) == "512 B"
    assert friendly_bytes(1536) == "1.50 KB"
