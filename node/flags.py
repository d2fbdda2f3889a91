"""The trijet-server command line: nats-server's flag names with Go ``flag`` package rules.

Theory of operation
-------------------
:func:`parse_flags` reads ``argv`` the way Go's ``flag`` package does: ``-name`` and ``--name``
are the same flag, ``-name=value``, ``-name value`` for non-booleans, booleans only as ``-name``
or ``-name=false``; parsing stops at ``--`` or the first non-flag, and positional ``help`` /
``version`` are accepted like nats-server. The result is a plain ``{canonical name: value}``
dict (aliases such as ``-p``/``--port`` map to one canonical key through :data:`FLAGS`), so the
caller can look at ``-c``/``-h``/``-v``/``-t`` before any config exists. :func:`apply_flags`
then writes the flags over a :class:`~node.config.ServerConfig` — after the config file, so
that flags override it. Flags nats-server has but trijet ignores are accepted with a warning.
:func:`usage` and :func:`version_text` are the ``-h`` and ``-v`` texts.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from node.configtypes import (
    EXE,
    AuthConfig,
    ClusterConfig,
    ConfigError,
    ServerConfig,
    TLSConfig,
)
from node.version import NATS_VERSION, TRIJET_VERSION

__all__ = ["FLAGS", "apply_flags", "parse_flags", "usage", "version_text"]

FlagKind = Literal["bool", "int", "str"]

#: flag name (as typed, without dashes) → (canonical key, kind)
FLAGS: dict[str, tuple[str, FlagKind]] = {}


def _flag(kind: FlagKind, canonical: str, *names: str) -> None:
    for n in names or (canonical,):
        FLAGS[n] = (canonical, kind)


_flag("bool", "help", "h", "help")
_flag("bool", "help_tls")
_flag("bool", "version", "v", "version")
_flag("str", "host", "a", "addr", "net")
_flag("int", "port", "p", "port")
_flag("str", "server_name", "n", "name", "server_name")
_flag("str", "pid_file", "P", "pid")
_flag("int", "http_port", "m", "http_port")
_flag("int", "https_port", "ms", "https_port")
_flag("str", "config", "c", "config")
_flag("bool", "test", "t")
_flag("str", "signal", "sl", "signal")
_flag("str", "client_advertise")
_flag("str", "ports_file_dir")
_flag("str", "log_file", "l", "log")
_flag("bool", "logtime", "T", "logtime")
_flag("bool", "logtime_utc")
_flag("bool", "syslog", "s", "syslog")
_flag("str", "remote_syslog", "r", "remote_syslog")
_flag("bool", "debug", "D", "debug")
_flag("bool", "trace", "V", "trace")
_flag("bool", "VV")
_flag("bool", "DV")
_flag("bool", "DVV")
_flag("int", "log_size_limit")
_flag("int", "max_traced_msg_len")
_flag("int", "profile")
_flag("bool", "jetstream", "js", "jetstream")
_flag("str", "store_dir", "sd", "store_dir")
_flag("str", "user")
_flag("str", "pass")
_flag("str", "auth")
_flag("bool", "tls")
_flag("bool", "tlsverify")
_flag("str", "tlscert")
_flag("str", "tlskey")
_flag("str", "tlscacert")
_flag("str", "routes")
_flag("str", "cluster", "cluster", "cluster_listen")
_flag("str", "cluster_name")
_flag("bool", "no_advertise")
_flag("str", "cluster_advertise")
_flag("int", "connect_retries")
# trijet extensions (nats-server has no such flags)
_flag("int", "max_payload")
_flag("str", "cluster_secret")

_IGNORED_FLAGS = ("syslog", "remote_syslog", "log_size_limit", "max_traced_msg_len", "profile")
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _flag_error(msg: str) -> ConfigError:
    return ConfigError(f"{msg}\n(see {EXE} --help)")


def parse_flags(argv: list[str]) -> dict[str, Any]:
    """Parse arguments with Go ``flag`` semantics into ``{canonical name: value}``.

    Later occurrences win. Positional ``help``/``version`` are accepted like nats-server.

    Raises:
        ConfigError: ``flag provided but not defined: -x``, ``flag needs an argument: -x``,
            ``invalid value "v" for flag -x: parse error``, ``unrecognized command: "x"``.
    """
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if len(arg) < 2 or arg[0] != "-":
            break
        i += 1
        dashes = 2 if arg.startswith("--") else 1
        body = arg[dashes:]
        if not body or body[0] in "-=":
            raise _flag_error(f"bad flag syntax: {arg}")
        name, has_value, value = body.partition("=")
        if name not in FLAGS:
            raise _flag_error(f"flag provided but not defined: -{name}")
        canonical, kind = FLAGS[name]
        if kind == "bool":
            if not has_value:
                out[canonical] = True
            elif value in _GO_TRUE:
                out[canonical] = True
            elif value in _GO_FALSE:
                out[canonical] = False
            else:
                raise _flag_error(f'invalid boolean value "{value}" for -{name}: parse error')
            continue
        if not has_value:
            if i >= len(argv):
                raise _flag_error(f"flag needs an argument: -{name}")
            value = argv[i]
            i += 1
        if kind == "int":
            try:
                out[canonical] = int(value, 0)
            except ValueError:
                raise _flag_error(
                    f'invalid value "{value}" for flag -{name}: parse error'
                ) from None
        else:
            out[canonical] = value
    for rest in argv[i:]:
        if rest == "version":
            out["version"] = True
        elif rest == "help":
            out["help"] = True
        else:
            raise _flag_error(f'unrecognized command: "{rest}"')
    return out


def _parse_cluster_url(text: str) -> tuple[str, int]:
    m = re.fullmatch(
        r"(?:[a-z][a-z0-9+.-]*://)?(?:[^@/]*@)?(\[[^\]]*\]|[^:/]*)(?::(-?\d+))?/?", text
    )
    if m is None or m.group(2) is None:
        raise ConfigError(f"could not parse cluster URL {text!r} (expected nats://host:port)")
    host = m.group(1).strip("[]") or "0.0.0.0"
    return host, int(m.group(2))


def apply_flags(cfg: ServerConfig, flags: dict[str, Any]) -> None:
    """Apply parsed flags over ``cfg`` (flags win over the config file).

    Raises:
        ConfigError: inconsistent flags (TLS without cert/key, routes without a cluster, …).
    """
    simple = {
        "host": "host",
        "port": "port",
        "pid_file": "pid_file",
        "http_port": "http_port",
        "https_port": "https_port",
        "client_advertise": "client_advertise",
        "ports_file_dir": "ports_file_dir",
        "log_file": "log_file",
        "logtime": "logtime",
        "logtime_utc": "logtime_utc",
        "debug": "debug",
        "trace": "trace",
        "max_payload": "max_payload",
    }
    for key, attr in simple.items():
        if key in flags:
            setattr(cfg, attr, flags[key])
    if "server_name" in flags:
        if " " in flags["server_name"]:
            raise ConfigError("server name cannot contain spaces")
        cfg.server_name = flags["server_name"]
    if "VV" in flags:
        cfg.trace = cfg.trace_verbose = flags["VV"]
    if "DV" in flags:
        cfg.debug = cfg.trace = flags["DV"]
    if "DVV" in flags:
        cfg.debug = cfg.trace = cfg.trace_verbose = flags["DVV"]
    for key in _IGNORED_FLAGS:
        if flags.get(key):
            cfg.warnings.append(f"flag --{key} is not supported by trijet and is ignored")
    if "jetstream" in flags:
        cfg.jetstream.enabled = flags["jetstream"]
    if "store_dir" in flags:
        cfg.jetstream.store_dir = flags["store_dir"]
    if "user" in flags:
        cfg.auth.user = flags["user"]
    if "pass" in flags:
        cfg.auth.password = flags["pass"]
    if "auth" in flags:
        cfg.auth.token = flags["auth"]
    _apply_tls_flags(cfg, flags)
    _apply_cluster_flags(cfg, flags)


def _apply_tls_flags(cfg: ServerConfig, flags: dict[str, Any]) -> None:
    if flags.get("tls") is False:
        cfg.tls = None  # -tls=false disables TLS from the file too
        return
    if not any(k in flags for k in ("tls", "tlsverify", "tlscert", "tlskey", "tlscacert")):
        return
    cert = flags.get("tlscert")
    key = flags.get("tlskey")
    if not cert:
        raise ConfigError("TLS Server certificate must be present and valid")
    if not key:
        raise ConfigError("TLS Server private key must be present and valid")
    cfg.tls = TLSConfig(
        cert_file=cert,
        key_file=key,
        ca_file=flags.get("tlscacert"),
        verify=bool(flags.get("tlsverify", False)),
    )
    if cfg.auth.timeout_s == AuthConfig().timeout_s:
        cfg.auth.timeout_s = cfg.tls.timeout_s + 1.0


def _apply_cluster_flags(cfg: ServerConfig, flags: dict[str, Any]) -> None:
    if "cluster" in flags:
        if not flags["cluster"]:
            cfg.cluster = None  # --cluster "" disables clustering
        else:
            host, port = _parse_cluster_url(flags["cluster"])
            cfg.cluster = cfg.cluster or ClusterConfig()
            cfg.cluster.host, cfg.cluster.port = host, port
    extras = (
        "cluster_name",
        "no_advertise",
        "cluster_advertise",
        "connect_retries",
        "cluster_secret",
    )
    if "routes" in flags:
        routes = [r.strip() for r in flags["routes"].split(",") if r.strip()]
        if routes and cfg.cluster is None:
            raise ConfigError("solicited routes require cluster capabilities, e.g. --cluster")
        if cfg.cluster is not None:
            cfg.cluster.routes = routes
    for key in extras:
        if key not in flags:
            continue
        if cfg.cluster is None:
            cfg.warnings.append(f"flag --{key} has no effect without --cluster or a cluster block")
            continue
        attr = {
            "cluster_name": "name",
            "cluster_advertise": "advertise",
            "cluster_secret": "secret",
        }.get(key, key)
        if key == "cluster_name" and " " in flags[key]:
            raise ConfigError("cluster name cannot contain spaces")
        setattr(cfg.cluster, attr, flags[key])


def version_text() -> str:
    """What ``-v`` prints (without the newline)."""
    return f"{EXE}: v{TRIJET_VERSION} (nats-server compatible v{NATS_VERSION})"


_USAGE = """
Usage: trijet-server [options]

Server Options:
    -a, --addr, --net <host>         Bind to host address (default: 0.0.0.0)
    -p, --port <port>                Use port for clients (default: 4222)
    -n, --name
        --server_name <server_name>  Server name (default: auto)
    -P, --pid <file>                 File to store PID
    -m, --http_port <port>           Use port for http monitoring
    -ms,--https_port <port>          Use port for https monitoring
    -c, --config <file>              Configuration file
    -t                               Test configuration and exit
    -sl,--signal <signal>[=<pid>]    Send signal to trijet-server process (ldm, stop, quit, term, reopen, reload)
                                     <pid> can be either a PID (e.g. 1) or the path to a PID file (e.g. /var/run/trijet-server.pid)
        --client_advertise <string>  Client URL to advertise to other servers
        --ports_file_dir <dir>       Creates a ports file in the specified directory (<executable_name>_<pid>.ports).

Logging Options:
    -l, --log <file>                 File to redirect log output
    -T, --logtime                    Timestamp log entries (default: true)
        --logtime_utc                Timestamps in UTC instead of local timezone (default: false)
    -s, --syslog                     Log to syslog (accepted, ignored)
    -r, --remote_syslog <addr>       Syslog server addr (accepted, ignored)
    -D, --debug                      Enable debugging output
    -V, --trace                      Trace the raw protocol
    -VV                              Verbose trace (traces system account as well)
    -DV                              Debug and trace
    -DVV                             Debug and verbose trace (traces system account as well)
        --log_size_limit <limit>     Logfile size limit (accepted, ignored)
        --max_traced_msg_len <len>   Maximum printable length for traced messages (accepted, ignored)

JetStream Options:
    -js, --jetstream                 Enable JetStream functionality
    -sd, --store_dir <dir>           Set the storage directory

Authorization Options:
        --user <user>                User required for connections
        --pass <password>            Password required for connections
        --auth <token>               Authorization token required for connections

TLS Options:
        --tls                        Enable TLS, do not verify clients (default: false)
        --tlscert <file>             Server certificate file
        --tlskey <file>              Private key for server certificate
        --tlsverify                  Enable TLS, verify client certificates
        --tlscacert <file>           Client certificate CA for verification

Cluster Options:
        --routes <rurl-1, rurl-2>    Routes to solicit and connect
        --cluster <cluster-url>      Cluster URL for solicited routes
        --cluster_name <string>      Cluster Name, if not set one will be dynamically generated
        --no_advertise <bool>        Do not advertise known cluster information to clients
        --cluster_advertise <string> Cluster URL to advertise to other servers
        --connect_retries <number>   For implicit routes, number of connect retries
        --cluster_listen <url>       Cluster url from which members can solicit routes
        --cluster_secret <string>    Shared secret for Raft peer links (trijet)

Trijet Options:
        --max_payload <bytes>        Maximum message payload (default: 1048576)

Profiling Options:
        --profile <port>             Profiling HTTP port (accepted, ignored)

Common Options:
    -h, --help                       Show this message
    -v, --version                    Show version
        --help_tls                   TLS help
"""


def usage() -> str:
    """The ``-h`` text, laid out like nats-server's."""
    return _USAGE + "\n"
