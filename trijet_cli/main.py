"""The ``trijet`` client command line (natscli's verbs); see the package docstring.

``main(argv)`` parses, connects once, runs the verb's coroutine with a
:class:`~trijet_cli.conn.JetStreamApi`, and turns :class:`CliError` into
``trijet: error: …`` with exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from trijet_cli import consumers, kv, messaging, objects, server, streams
from trijet_cli.conn import (
    CliError,
    JetStreamApi,
    Options,
    add_connection_flags,
    connect,
    report_error,
)

VERBS = (
    "stream",
    "str",
    "consumer",
    "con",
    "obs",
    "kv",
    "object",
    "obj",
    "pub",
    "publish",
    "sub",
    "subscribe",
    "request",
    "req",
    "reply",
    "server",
    "account",
    "bench",
)


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    add_connection_flags(common, top=False)
    top = argparse.ArgumentParser(
        prog="trijet", description="NATS and JetStream client tool", allow_abbrev=False
    )
    add_connection_flags(top, top=True)
    sub = top.add_subparsers(dest="command", required=True, metavar="<command>")
    streams.add_parsers(sub, common)
    consumers.add_parsers(sub, common)
    kv.add_parsers(sub, common)
    objects.add_parsers(sub, common)
    messaging.add_parsers(sub, common)
    server.add_parsers(sub, common)
    return top


async def _run(a: argparse.Namespace) -> None:
    opts = Options.from_args(a)
    nc = await connect(opts)
    try:
        await a.run(JetStreamApi(nc, opts), a)
    finally:
        try:
            await asyncio.wait_for(nc.drain(), opts.timeout_s)
        except Exception:  # the connection may already be gone; nothing left to report
            await nc.close()


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        asyncio.run(_run(a))
    except CliError as exc:
        return report_error(exc)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # as natscli: one line, no trace (TRIJET_DEBUG=1 shows it)
        if os.environ.get("TRIJET_DEBUG") == "1":
            raise
        return report_error(
            CliError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
