"""trijet-server configuration: one typed tree, every default, nats-server flags and conf files.

Theory of operation
-------------------
:class:`ServerConfig` is the only configuration object the rest of the server reads; every
default lives in its dataclass fields. :func:`load` builds it the way nats-server's
``ConfigureOptions`` does: parse the command line, read the ``-c`` file if any, then apply the
flags again so that **flags override the file**.

``-h``, ``-v`` and ``-t`` do not produce a config: :func:`load` raises :class:`ConfigExit`
carrying the text to print and the exit code. :func:`load_or_exit` does the printing/exiting
for the process entry point.

This module is the public face of configuration; import every config name from here. The
concepts live in their own modules, in dependency order (no cycles):

* :mod:`node.configtypes` — the tree (dataclasses, defaults), :class:`ConfigError`,
  :class:`ConfigExit`, ``EXE``;
* :mod:`node.conftree` — a parsed conf file (:mod:`node.conffile`) → the tree:
  :func:`apply_file`, :func:`parse_duration`, nats-server's key names, aliases and errors;
* :mod:`node.flags` — the command line (Go ``flag`` rules, nats-server's flag names):
  :data:`FLAGS`, :func:`parse_flags`, :func:`apply_flags`, :func:`usage`, :func:`version_text`.
"""

from __future__ import annotations

import sys

from node.configtypes import (
    EXE,
    AuthConfig,
    ClusterConfig,
    ConfigError,
    ConfigExit,
    JetStreamConfig,
    Permissions,
    ResponsePerms,
    ServerConfig,
    SubjectPerms,
    TLSConfig,
    UserSpec,
)
from node.conftree import apply_file
from node.confvalues import parse_duration
from node.flags import FLAGS, apply_flags, parse_flags, usage, version_text

__all__ = [
    "FLAGS",
    "AuthConfig",
    "ClusterConfig",
    "ConfigError",
    "ConfigExit",
    "JetStreamConfig",
    "Permissions",
    "ResponsePerms",
    "ServerConfig",
    "SubjectPerms",
    "TLSConfig",
    "UserSpec",
    "apply_file",
    "apply_flags",
    "dev_defaults",
    "load",
    "load_or_exit",
    "parse_duration",
    "parse_flags",
    "reread",
    "usage",
    "version_text",
]


def dev_defaults() -> ServerConfig:
    """Defaults for ``trijet serve``: monitoring on 8222, JetStream on, data in ``./data``."""
    cfg = ServerConfig(http_port=8222)
    cfg.jetstream.enabled = True
    cfg.jetstream.store_dir = "./data"
    return cfg


def load(argv: list[str], *, env: dict[str, str] | None = None) -> ServerConfig:
    """Build the server configuration from command-line arguments (without the program name).

    Args:
        argv: e.g. ``["-c", "server.conf", "-p", "-1", "-DV"]``.
        env: environment for ``$VAR`` references in the file; ``os.environ`` when None.

    Returns:
        The complete configuration. ``warnings`` lists accepted-but-ignored settings.

    Raises:
        ConfigError: unknown flag, bad flag value, bad config file (message names the
            location), inconsistent settings.
        ConfigExit: ``-h``/``--help``, ``-v``/``--version``, or ``-t`` on a valid file.
    """
    flags = parse_flags(argv)
    if flags.get("help") or flags.get("help_tls"):
        raise ConfigExit(0, usage(), "stdout")
    if flags.get("version"):
        raise ConfigExit(0, version_text() + "\n", "stdout")
    if flags.get("signal"):
        from node.signals import process_signal

        raise ConfigExit(*process_signal(str(flags["signal"])))
    cfg = ServerConfig()
    config_file = flags.get("config")
    if config_file:
        apply_file(cfg, str(config_file), env=env)
    elif flags.get("test"):
        raise ConfigError("must specify [-c, --config] option to check configuration file syntax")
    if flags.get("test"):
        raise ConfigExit(
            0,
            f"{EXE}: configuration file {config_file} is valid ({cfg.config_digest})\n",
            "stderr",
        )
    apply_flags(cfg, flags)
    cfg.flags = dict(flags)
    check(cfg)
    return cfg


def check(cfg: ServerConfig) -> None:
    """The rules over the whole configuration, once file and flags are applied.

    Raises:
        ConfigError: settings that do not go together.
    """
    if cfg.cluster is not None and cfg.jetstream.enabled and not cfg.server_name:
        raise ConfigError("jetstream cluster requires `server_name` to be set")
    if cfg.max_payload > cfg.max_pending:
        raise ConfigError(
            f"max_payload ({cfg.max_payload}) cannot be higher than max_pending ({cfg.max_pending})"
        )


def reread(cfg: ServerConfig, *, env: dict[str, str] | None = None) -> ServerConfig:
    """The configuration ``cfg`` came from, read again: its defaults, its file as it is
    now, its command-line flags over them (a reload, as nats-server's ``Reload``).

    Raises:
        ConfigError: no file to read (nats-server's message), or what :func:`load` raises.
    """
    if not cfg.config_file:
        raise ConfigError("can only reload config when a file is provided using -c or --config")
    new = dev_defaults() if cfg.defaults == "dev" else ServerConfig()
    new.defaults = cfg.defaults
    apply_file(new, cfg.config_file, env=env)
    apply_flags(new, cfg.flags)
    new.flags = dict(cfg.flags)
    check(new)
    return new


def load_or_exit(argv: list[str]) -> ServerConfig:
    """:func:`load`, printing and exiting like nats-server on errors, help, version and ``-t``.

    Errors go to stderr as ``trijet-server: <message>`` with exit status 1.
    """
    try:
        return load(argv)
    except ConfigExit as ex:
        print(ex.text, end="", file=sys.stdout if ex.stream == "stdout" else sys.stderr)
        raise SystemExit(ex.code) from None
    except ConfigError as exc:
        print(f"{EXE}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
