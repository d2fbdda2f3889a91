"""Run the ``trijet`` client tool as a subprocess and normalise its output for goldens.

``run_cli(url, *args)`` runs ``python -m trijet_cli.main`` with ``NATS_URL`` set
(as a user would) and returns (exit status, stdout, stderr).  ``normalise``
replaces what legitimately differs between runs and servers: wall-clock times,
elapsed durations ("… ago", table "Last …" columns), and the server's version
and API level (trijet and nats-server report different ones); table rows are
compared with their padding collapsed, after checking that every line of each
table has the same width.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
CLI_TIMEOUT_S = 60.0
UPDATE_ENV = "TRIJET_GOLDEN_UPDATE"  # =1: rewrite the goldens from nats-server's answers

_DUR = r"(?:\d+y)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+(?:\.\d+)?(?:ns|µs|ms|s))|never"
_SUBS = [
    (re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"), "<TIME>"),
    (re.compile(r"^\d{2}:\d{2}:\d{2} ", re.M), "<HMS> "),
    (re.compile(r"^\[\d{2}:\d{2}:\d{2}\]", re.M), "[<HMS>]"),
    (re.compile(rf"(Last delivery|Last Ack): ({_DUR}) ago"), r"\1: <DUR> ago"),
    (re.compile(rf"seen ({_DUR}) ago"), "seen <DUR> ago"),
    (re.compile(rf"(Leader: \S+) \(({_DUR})\)"), r"\1 (<DUR>)"),
    (re.compile(r"Host Version: \S+"), "Host Version: <VERSION>"),
    (re.compile(r"hosted at level \d+"), "hosted at level <LEVEL>"),
    (re.compile(r"with rtt [0-9.]+ms"), "with rtt <DUR>"),
]
_TABLE_DUR = re.compile(rf"│ ({_DUR}) +│$")


def run_cli(url: str, *args: str, stdin: str = "") -> tuple[int, str, str]:
    env = {**os.environ, "NATS_URL": url, "PYTHONPATH": str(ROOT)}
    p = subprocess.run(
        [sys.executable, "-m", "trijet_cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=CLI_TIMEOUT_S,
    )
    return p.returncode, p.stdout, p.stderr


def _table_lines_equal_width(text: str) -> None:
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line[:1] in ("╭", "│", "├", "╰"):
            block.append(line)
        elif block:
            widths = {len(x) for x in block}
            assert len(widths) == 1, "table lines differ in width:\n" + "\n".join(block)
            block = []


def normalise(text: str) -> str:
    _table_lines_equal_width(text)
    for rx, rep in _SUBS:
        text = rx.sub(rep, text)
    out = []
    for line in text.splitlines():
        if line[:1] in ("╭", "│", "├", "╰"):
            line = _TABLE_DUR.sub("│ <DUR> │", line)
            line = re.sub(r"─+", "─", re.sub(r" {2,}", " ", line))
        out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def check_golden(name: str, text: str, kind: str) -> None:
    """Compare normalised ``text`` with ``golden/<name>.txt`` (rewritten from nats-server on update)."""
    path = GOLDEN / f"{name}.txt"
    got = normalise(text)
    if os.environ.get(UPDATE_ENV) == "1" and kind == "reference":
        path.write_text(got)
        return
    want = path.read_text()
    assert got == want, f"{name} ({kind}) differs from {path}:\n--- want\n{want}\n--- got\n{got}"
