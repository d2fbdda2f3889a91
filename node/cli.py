"""The ``trijet`` command: operator conveniences around the server.

``trijet serve [server flags]`` starts one server with the embedded development
defaults (client port 4222, monitoring 8222, JetStream on, data in ``./data``);
any nats-server flag given after ``serve`` overrides them, and ``-c FILE``
layers a config file in between (defaults < file < flags).
"""

from __future__ import annotations

import sys

USAGE = """usage: trijet <command> [args]

commands:
  serve [flags]   start a server with the development defaults
                  (client 4222, monitoring 8222, JetStream on, data in ./data);
                  accepts every trijet-server / nats-server flag
  cluster [-n N]  start an N-node cluster on 127.0.0.1 (ports and data dirs
                  chosen for you, under ./data/cluster); Ctrl-C stops it
  version         print the version

client commands (natscli's verbs, over the NATS protocol; `trijet <command> -h`):
  stream, consumer, kv, object, pub, sub, request, reply, server, account, bench
"""


def _serve(args: list[str]) -> int:
    from node.config import (
        ConfigError,
        ConfigExit,
        apply_file,
        apply_flags,
        dev_defaults,
        parse_flags,
    )
    from node.server_main import run_config

    try:
        flags = parse_flags(args)
        if flags.get("help"):
            print(USAGE)
            return 0
        if flags.get("signal"):  # signal a running server, as trijet-server --signal
            from node.signals import process_signal

            return process_signal(str(flags["signal"]))[0]
        cfg = dev_defaults()
        cfg.defaults = "dev"
        if flags.get("config"):
            apply_file(cfg, str(flags["config"]))
        apply_flags(cfg, flags)
        cfg.flags = dict(flags)
    except ConfigExit as ex:
        print(ex.text, end="", file=sys.stdout if ex.stream == "stdout" else sys.stderr)
        return ex.code
    except ConfigError as exc:
        print(f"trijet: {exc}", file=sys.stderr)
        return 1
    return run_config(cfg)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd == "serve":
        return _serve(rest)
    if cmd == "cluster":
        from node.launcher import main as cluster_main

        return cluster_main(rest)
    if cmd == "version":
        from node.version import NATS_VERSION, TRIJET_VERSION

        print(f"trijet {TRIJET_VERSION} (nats-server {NATS_VERSION} compatible)")
        return 0
    from trijet_cli.main import VERBS

    if cmd in VERBS or cmd.startswith("-"):  # natscli's connection flags may come first
        from trijet_cli.main import main as client_main

        return client_main(args)
    print(f"trijet: unknown command {cmd!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
