"""A Docker engine for the deploy tests: found running, or started by hand and stopped by PID.

Theory of operation: ``engine()`` is a context manager.  When ``docker info``
already answers, it uses that engine and leaves it alone.  Otherwise it starts
``dockerd`` (Debian's docker.io; no systemd here) as a child process with its own
pid file and log in a temp dir, waits (bounded) until ``docker info`` answers, and
on exit sends SIGTERM to that PID, waits, and SIGKILLs only that PID if it hangs.
``ensure_base_image()`` imports the debootstrap'd root file system that
``.ci/docker-setup`` packed as ``localhost/debian-base`` when the engine lacks it.

``missing()`` names what is not installed (``.ci/docker-setup`` installs it all);
the tests skip on it unless ``TRIJET_REQUIRE_DOCKER=1`` (``.ci/run`` sets it), in
which case they fail: in CI the compose test must run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

BASE_IMAGE = "localhost/debian-base"
BASE_TAR = Path(os.environ.get("TRIJET_DOCKER_CACHE", "/var/cache/trijet-docker")) / (
    "debian-base.tar"
)
ENGINE_START_S_MAX = 60.0
ENGINE_STOP_S_MAX = 30.0
POLL_S = 0.2


def _ok(*cmd: str, timeout: float = 20.0) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def engine_answers() -> bool:
    return _ok("docker", "info", timeout=10.0)


def missing() -> list[str]:
    """What the compose test needs and this machine lacks (empty when all is there)."""
    out = [b for b in ("docker", "dockerd") if shutil.which(b) is None]
    if not out and not _ok("docker", "compose", "version"):
        out.append("the docker compose v2 plugin")
    if not out and not _ok("docker", "buildx", "version"):
        out.append("the docker buildx plugin")
    if not BASE_TAR.exists() and not engine_answers():
        out.append(str(BASE_TAR))
    return out


def require_or_skip() -> None:
    """Skip (fail under ``TRIJET_REQUIRE_DOCKER=1``) when the tools are missing."""
    lack = missing()
    if not lack:
        return
    why = f"docker engine tools missing: {', '.join(lack)} (run .ci/docker-setup as root)"
    if os.environ.get("TRIJET_REQUIRE_DOCKER") == "1":
        pytest.fail(why)
    pytest.skip(why)


@contextlib.contextmanager
def engine() -> Iterator[None]:
    """A running engine for the block; one started here is stopped by its PID after."""
    if engine_answers():
        yield
        return
    with tempfile.TemporaryDirectory(prefix="trijet-dockerd-") as tmp:
        log_path = Path(tmp) / "dockerd.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                ["dockerd", "--pidfile", str(Path(tmp) / "dockerd.pid")],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            deadline = time.monotonic() + ENGINE_START_S_MAX
            while not engine_answers():
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"dockerd did not start:\n{log_path.read_text()[-4000:]}")
                time.sleep(POLL_S)  # polling another process's readiness, bounded above
            yield
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(ENGINE_STOP_S_MAX)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(ENGINE_STOP_S_MAX)


def ensure_base_image() -> None:
    """``localhost/debian-base`` exists in the engine (imported from the setup's tarball)."""
    if _ok("docker", "image", "inspect", BASE_IMAGE):
        return
    if not BASE_TAR.exists():
        pytest.fail(f"{BASE_IMAGE} is missing and so is {BASE_TAR} (run .ci/docker-setup)")
    subprocess.run(["docker", "import", str(BASE_TAR), BASE_IMAGE], check=True, capture_output=True)
