"""Shared fixtures: real server processes (trijet and the reference nats-server).

* ``start_server`` — a factory: ``start_server(kind="trijet", args=[...], config="...")``;
  every server it starts is stopped (SIGTERM, then SIGKILL) at teardown.
* ``trijet_server`` / ``reference_server`` — one default server of that kind.
* ``any_server`` — parametrised over both kinds (ids ``trijet`` and ``reference``).
* ``tls_certs`` — session-wide CA, server and client certificates (openssl CLI).

On failure the server logs are printed (pytest shows captured output).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import KINDS, ServerProcess, reference_binary
from tests.support.servers import start_server as _start

StartServer = Callable[..., ServerProcess]

# Server processes started from here compile their modules once and reuse the
# bytecode, as an installed server does: a PYTHONDONTWRITEBYTECODE inherited
# from the calling shell would make every start recompile trijet (~0.35 s).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    started: list[ServerProcess] = []
    counter = iter(range(1_000_000))

    def factory(kind: str = "trijet", args: Any = (), **kw: Any) -> ServerProcess:
        if kind == "reference" and reference_binary() is None:
            pytest.skip("reference nats-server not installed")
        kw.setdefault("workdir", tmp_path / f"{kind}-{next(counter)}")
        sp = _start(kind, list(args), **kw)  # type: ignore[arg-type]
        started.append(sp)
        return sp

    try:
        yield factory
    finally:
        for sp in started:
            try:
                sp.stop()
            finally:
                print(f"--- {sp.kind} pid={sp.pid} rc={sp.returncode} log tail ---")
                print(sp.log_text()[-3000:])


@pytest.fixture
def trijet_server(start_server: StartServer) -> ServerProcess:
    return start_server("trijet")


@pytest.fixture
def reference_server(start_server: StartServer) -> ServerProcess:
    return start_server("reference")


@pytest.fixture(params=KINDS)
def server_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def any_server(start_server: StartServer, server_kind: str) -> ServerProcess:
    return start_server(server_kind)


@pytest.fixture(scope="session")
def tls_certs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.support.certs import make_certs, openssl_available

    if not openssl_available():
        pytest.skip("openssl CLI not available")
    return make_certs(tmp_path_factory.mktemp("certs"))
