"""Run nats.js scenarios (the node project in ``tests/js``) from tests.

Theory of operation: ``tests/js`` is a small node project pinning the npm
``nats`` client; ``./dev setup`` runs ``npm ci`` there.  Each scenario script
(``kv.mjs``, ``objstore.mjs``) takes the server URL and a scenario name, runs
that scenario with the real client and prints one JSON line of observations
(see ``tests/js/lib.mjs``).  ``run_scenario`` starts ``node`` with a bounded
timeout, fails with the script's stderr if it exits non-zero or times out, and
returns the parsed observations.  ``requires_node`` skips a test module when
node or the installed client is missing (a machine without node can still run
the rest of the suite; CI has node).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

JS_PROJECT = Path(__file__).resolve().parents[1] / "js"
SCENARIO_TIMEOUT_S = 30.0


def node_binary() -> str | None:
    """Path of ``node``, or None."""
    return shutil.which("node")


def client_installed() -> bool:
    """True when ``npm ci`` has installed the ``nats`` package into ``tests/js``."""
    return (JS_PROJECT / "node_modules" / "nats" / "package.json").is_file()


def _skip_reason() -> str | None:
    if node_binary() is None:
        return "node is not installed"
    if not client_installed():
        return "nats.js not installed (run ./dev setup or npm ci in tests/js)"
    return None


#: Marker for test modules that drive nats.js.
requires_node = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


class NodeScenarioError(AssertionError):
    """The node script failed outside its recorded steps, or ran out of time."""


def run_scenario(
    script: str, url: str, scenario: str, *args: str, timeout: float = SCENARIO_TIMEOUT_S
) -> dict[str, Any]:
    """Run ``node tests/js/<script> <url> <scenario> [args]`` and parse its observations.

    Args:
        script: file name inside ``tests/js`` (e.g. ``"kv.mjs"``).
        url: the server's client URL.
        scenario: the scenario's name in that script.
        args: extra arguments for the scenario.
        timeout: bound on the whole run in seconds (node start-up included).

    Returns:
        The observations: step name to value, or ``{"error": {...}}`` for a
        step whose client call threw.

    Raises:
        NodeScenarioError: non-zero exit (the message carries stderr), a
            timeout, or output that is not one JSON object.
    """
    node = node_binary()
    if node is None:
        raise NodeScenarioError("node is not installed")
    cmd = [node, str(JS_PROJECT / script), url, scenario, *args]
    try:
        proc = subprocess.run(
            cmd,
            cwd=str(JS_PROJECT),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = (exc.stderr or b"").decode(errors="replace")
        raise NodeScenarioError(
            f"{script} {scenario}: no result within {timeout}s\n{stderr}"
        ) from exc
    stdout = proc.stdout.decode(errors="replace")
    stderr = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        raise NodeScenarioError(f"{script} {scenario}: exit {proc.returncode}\n{stderr}{stdout}")
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError) as exc:
        raise NodeScenarioError(f"{script} {scenario}: no JSON result\n{stdout}\n{stderr}") from exc
    if not isinstance(result, dict):
        raise NodeScenarioError(f"{script} {scenario}: result is not an object: {result!r}")
    return result


def error_of(observed: Any) -> dict[str, Any] | None:
    """The recorded error of a step, or None when the step succeeded."""
    if isinstance(observed, dict) and set(observed) == {"error"}:
        err = observed["error"]
        return err if isinstance(err, dict) else None
    return None


def error_message(observed: Any) -> str:
    """The message of a step that must have failed (assertion error otherwise)."""
    err = error_of(observed)
    assert err is not None, f"expected an error, got {observed!r}"
    return str(err["message"])


class InteractiveScenario:
    """A scenario that stops half-way for the test (``tests/js/cluster.mjs``).

    The script prints ``{"ready": {...}}`` and waits for a line ``go`` on its
    stdin; in between, the test does what it must (kill a server, ...).  Use
    as a context manager: the process is killed on exit if still running.

    Args:
        script: file name inside ``tests/js``.
        url: the server's client URL.
        scenario: the scenario's name in that script.
        timeout: bound on each phase in seconds.
    """

    def __init__(
        self, script: str, url: str, scenario: str, *, timeout: float = SCENARIO_TIMEOUT_S
    ) -> None:
        node = node_binary()
        if node is None:
            raise NodeScenarioError("node is not installed")
        self.name = f"{script} {scenario}"
        self.timeout = timeout
        self.proc = subprocess.Popen(
            [node, str(JS_PROJECT / script), url, scenario],
            cwd=str(JS_PROJECT),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def ready(self) -> dict[str, Any]:
        """Wait (bounded) for the ready line; returns what it carries."""
        assert self.proc.stdout is not None
        holder: list[bytes] = []

        def read() -> None:
            assert self.proc.stdout is not None
            holder.append(self.proc.stdout.readline())

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(self.timeout)
        line = holder[0] if holder else b""
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise NodeScenarioError(
                f"{self.name}: no ready line: {line!r}\n{err.decode(errors='replace')}"
            ) from None
        if not isinstance(doc, dict) or "ready" not in doc:
            raise NodeScenarioError(f"{self.name}: not a ready line: {line!r}")
        return dict(doc["ready"])

    def go(self) -> dict[str, Any]:
        """Let the scenario finish; returns its observations."""
        try:
            out, err = self.proc.communicate(b"go\n", timeout=self.timeout)
        except subprocess.TimeoutExpired as exc:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise NodeScenarioError(f"{self.name}: no result in {self.timeout}s\n{err!r}") from exc
        text = out.decode(errors="replace")
        if self.proc.returncode != 0:
            raise NodeScenarioError(f"{self.name}: exit {self.proc.returncode}\n{err!r}{text}")
        lines = [x for x in text.splitlines() if x.strip()]
        try:
            result = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError) as exc:
            raise NodeScenarioError(f"{self.name}: no JSON result\n{text}\n{err!r}") from exc
        return dict(result)

    def __enter__(self) -> InteractiveScenario:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
