"""Process and protocol helpers for tests that run real servers.

* ``servers``: start trijet or the reference nats-server with flags or a conf text,
  wait for the ports file, stop with SIGTERM then SIGKILL.
* ``raw``: a raw-socket NATS client and transcript helpers.
* ``certs``: CA / server / client certificates via the openssl CLI.
* ``aio``: run nats-py (asyncio) scenarios from sync tests.
"""

from tests.support.raw import RawClient, Transcript, connect_line, split_ops, transcript
from tests.support.servers import (
    KINDS,
    ServerProcess,
    ServerStartError,
    js_pair,
    reference_binary,
    start_server,
)

__all__ = [
    "KINDS",
    "RawClient",
    "ServerProcess",
    "ServerStartError",
    "Transcript",
    "connect_line",
    "js_pair",
    "reference_binary",
    "split_ops",
    "start_server",
    "transcript",
]
