"""``trijet-server``: parse flags/config, set up logging, run until a signal.

SIGTERM and SIGINT stop accepting and drain connections before exit, as the
issue asks (nats-server's lame-duck mode is not implemented yet).
"""

from __future__ import annotations

import logging
import os
import signal

import trio

from node.config import ServerConfig, load_or_exit
from node.logsetup import setup_logging

log = logging.getLogger("node.server")


async def serve(cfg: ServerConfig) -> None:
    """Run a server with ``cfg`` until SIGTERM/SIGINT."""
    from node.server import Server

    server = Server(cfg)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for signum in signals:
                    log.info("Trapped %r signal", signal.Signals(signum).name)
                    server.shutdown()
                    return

            nursery.start_soon(on_signal)
            await server.run()
            nursery.cancel_scope.cancel()


def run_config(cfg: ServerConfig) -> int:
    setup_logging(cfg)
    for w in cfg.warnings:
        log.warning("%s", w)
    if cfg.pid_file:
        with open(cfg.pid_file, "w") as fh:
            fh.write(str(os.getpid()))
    try:
        trio.run(serve, cfg)
    except OSError as exc:
        log.error("Error listening on port: %s", exc)
        return 1
    finally:
        if cfg.pid_file:
            try:
                os.unlink(cfg.pid_file)
            except FileNotFoundError:
                pass
    return 0


def run(argv: list[str]) -> int:
    """Entry for ``trijet-server``."""
    return run_config(load_or_exit(argv))
