"""What a configuration reload changes: nats-server's ``diffOptions``, on trijet's tree.

Theory of operation: :func:`diff` compares the running :class:`ServerConfig` with the one just
read and returns a :class:`Plan` — the changes the server applies live, each with the notice
nats-server logs for it (``Reloaded: max_payload = 2048``) — or raises :class:`ReloadRefused`
with nats-server's text for the first change it does not apply (``config reload not supported
for ServerName: old=a, new=b``); then nothing at all is applied.  Settings are named by
nats-server's option fields in those texts.

Applied live, as nats-server does: logging (debug, trace, trace_verbose, logtime, logtime_utc,
log_file), authorization (user, password, token, users, nkey users, timeout, default
permissions), accounts (users, permissions, exports, imports, JetStream and its limits),
max_payload, max_control_line, max_connections, ping_interval, ping_max, write_deadline,
client_advertise, pid_file, ports_file_dir, tags, connect/reconnect error reports, TLS (new
connections), cluster routes, and larger JetStream max_memory_store/max_file_store.  Refused
as there: listen host and port, server name, monitoring ports, max_pending, max_subscriptions,
lame-duck settings, the system account, no_auth_user (unless its user is removed with it),
JetStream's store dir, smaller or dynamic-to-fixed store limits, cluster host and port.
trijet also refuses (nats-server would apply them) turning JetStream on or off, a cluster
added or removed, cluster settings other than routes, and JetStream settings other than the
store limits (domain, sync interval, unique tag, limits): each names its field.

Pure: imports neither trio nor socket.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from node.configtypes import ServerConfig

#: fields nats-server refuses to reload: trijet field -> nats-server option field
REFUSED = {
    "host": "Host",
    "port": "Port",
    "server_name": "ServerName",
    "http_host": "HTTPHost",
    "http_port": "HTTPPort",
    "https_port": "HTTPSPort",
    "http_base_path": "HTTPBasePath",
    "max_pending": "MaxPending",
    "max_subscriptions": "MaxSubs",
    "lame_duck_duration_s": "LameDuckDuration",
    "lame_duck_grace_period_s": "LameDuckGracePeriod",
    "no_header_support": "NoHeaderSupport",
    "disable_sublist_cache": "DisableSublistCache",
    "max_closed_clients": "MaxClosedClients",
    "system_account": "SystemAccount",
}
#: fields applied live: trijet field -> (notice format, how the value is shown)
APPLIED = {
    "client_advertise": ("Reload: client_advertise = {}", "str"),
    "max_payload": ("Reloaded: max_payload = {}", "str"),
    "max_control_line": ("Reloaded: max_control_line = {}", "str"),
    "max_connections": ("Reloaded: max_connections = {}", "str"),
    "ping_interval_s": ("Reloaded: ping_interval = {}", "duration"),
    "ping_max": ("Reloaded: ping_max = {}", "str"),
    "write_deadline_s": ("Reloaded: write_deadline = {}", "duration"),
    "trace_verbose": ("Reloaded: trace_verbose = {}", "bool"),
    "trace": ("Reloaded: trace = {}", "bool"),
    "debug": ("Reloaded: debug = {}", "bool"),
    "logtime": ("Reloaded: logtime = {}", "bool"),
    "logtime_utc": ("Reloaded: logtime_utc = {}", "bool"),
    "log_file": ("Reloaded: log_file = {}", "str"),
    "pid_file": ("Reloaded: pid_file = {}", "str"),
    "ports_file_dir": ("Reloaded: ports_file_dir = {}", "str"),
    "server_tags": ("Reloaded: tags", "str"),
    "connect_error_reports": ("Reloaded: connect_error_reports = {}", "str"),
    "reconnect_error_reports": ("Reloaded: reconnect_error_reports = {}", "str"),
}
LOGGING = frozenset({"trace_verbose", "trace", "debug", "logtime", "logtime_utc", "log_file"})
#: not options (or handled elsewhere)
SKIPPED = frozenset(
    {"config_file", "config_digest", "warnings", "flags", "defaults", "auth", "accounts"}
)
#: JetStream fields trijet refuses to reload -> nats-server option field
JS_REFUSED = {
    "enabled": "JetStream",
    "domain": "JetStreamDomain",
    "sync_interval": "SyncInterval",
    "unique_tag": "JetStreamUniqueTag",
    "strict": "JetStreamStrict",
    "max_ha_assets": "JetStreamLimits",
    "limits": "JetStreamLimits",
    "raft_journal_entries_max": "RaftJournalEntriesMax",
    "raft_journal_bytes_max": "RaftJournalBytesMax",
}


class ReloadRefused(Exception):
    """A change nats-server does not apply live; the message is its text."""


@dataclass
class Plan:
    """What a reload applies, in nats-server's order of notices."""

    notices: list[str] = field(default_factory=list)
    logging: bool = False
    auth: bool = False
    max_payload: bool = False
    tls: bool = False
    pid_file: bool = False
    no_fast_producer_stall: bool = False
    ports_file_dir: str | None = None  # the old directory, when it changed
    routes_add: list[str] = field(default_factory=list)
    routes_remove: list[str] = field(default_factory=list)
    #: JetStream store limits raised: (max_memory or None, max_storage or None)
    js_store: tuple[int | None, int | None] | None = None


def go_value(v: Any) -> str:
    """A value as Go's ``%v`` shows it in nats-server's texts."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + " ".join(go_value(x) for x in v) + "]"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def go_duration(seconds: float) -> str:
    """Seconds as Go's ``time.Duration.String`` (``2m0s``, ``1.5s``, ``500ms``)."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms"
    whole = int(seconds)
    frac = seconds - whole
    h, rem = divmod(whole, 3600)
    m, s = divmod(rem, 60)
    sec = f"{s + frac:g}s"
    if h:
        return f"{h}h{m}m{sec}"
    if m:
        return f"{m}m{sec}"
    return sec


def friendly_bytes(n: int) -> str:
    """nats-server's ``friendlyBytes`` (``1.00 GB``)."""
    if n < 1024:
        return f"{n} B"
    units = "KMGTPE"
    exp = 0
    f = float(n)
    while f >= 1024 and exp < len(units):
        f /= 1024
        exp += 1
    return f"{f:.2f} {units[exp - 1]}B"


def _refuse(name: str, old: Any, new: Any) -> ReloadRefused:
    return ReloadRefused(
        f"config reload not supported for {name}: old={go_value(old)}, new={go_value(new)}"
    )


def diff(old: ServerConfig, new: ServerConfig) -> Plan:
    """The plan that takes a server running ``old`` to ``new``.

    Raises:
        ReloadRefused: the first change nats-server (or trijet) does not apply live.
    """
    plan = Plan()
    for f in dataclasses.fields(ServerConfig):
        name = f.name
        if name in SKIPPED:
            continue
        a, b = getattr(old, name), getattr(new, name)
        if name == "jetstream":
            _jetstream(plan, old, new)
            continue
        if name == "cluster":
            _cluster(plan, a, b)
            continue
        if name == "tls":
            if a != b:
                plan.tls = True
                plan.notices.append(f"Reloaded: tls = {'enabled' if b else 'disabled'}")
            continue
        if a == b:
            continue
        if name in REFUSED:
            raise _refuse(REFUSED[name], a, b)
        if name == "no_fast_producer_stall":
            plan.notices.append(f"Reloaded: fast producers will {'not ' if b else ''}be stalled")
            plan.no_fast_producer_stall = True
            continue
        fmt, kind = APPLIED[name]
        shown = go_duration(b) if kind == "duration" else go_value(b)
        plan.notices.append(fmt.format(shown))
        if name in LOGGING:
            plan.logging = True
        elif name == "max_payload":
            plan.max_payload = True
        elif name == "pid_file":
            plan.pid_file = True
        elif name == "ports_file_dir":
            plan.ports_file_dir = a or ""
    _auth(plan, old, new)
    return plan


def _auth(plan: Plan, old: ServerConfig, new: ServerConfig) -> None:
    """Authorization and accounts (nats-server: authorizationOption, usersOption,
    nkeysOption, accountsOption; each makes it reload authorization)."""
    oa, na = old.auth, new.auth
    if oa.no_auth_user != na.no_auth_user:
        gone = oa.no_auth_user and not na.no_auth_user
        still = any(oa.no_auth_user in (u.user, u.nkey) for u in na.users)
        if not gone or still:
            raise _refuse("NoAuthUser", oa.no_auth_user, na.no_auth_user)
    notices = []
    if oa.user != na.user:
        notices.append("Reloaded: authorization username")
    if oa.password != na.password:
        notices.append("Reloaded: authorization password")
    if oa.token != na.token:
        notices.append("Reloaded: authorization token")
    if oa.timeout_s != na.timeout_s:
        notices.append(f"Reloaded: authorization timeout = {go_value(na.timeout_s)}")
    # nats-server compares neither users nor accounts (they hold live state): every reload
    # reloads both, changed or not, and judges every connection again
    notices.append("Reloaded: authorization users")
    if [u for u in oa.users if u.nkey] != [u for u in na.users if u.nkey]:
        notices.append("Reloaded: authorization nkey users")
    notices.append("Reloaded: accounts")
    plan.auth = True
    plan.notices.extend(notices)


def _jetstream(plan: Plan, old: ServerConfig, new: ServerConfig) -> None:
    oj, nj = old.jetstream, new.jetstream
    for name, go in JS_REFUSED.items():
        a, b = getattr(oj, name), getattr(nj, name)
        if a != b:
            raise _refuse(go, a, b)
    if not oj.enabled:
        return
    if oj.store_dir != nj.store_dir:
        raise ReloadRefused("config reload not supported for jetstream storage directory")
    raised: list[int | None] = [None, None]
    for i, attr in enumerate(("max_memory_store", "max_file_store")):
        a, b = getattr(oj, attr), getattr(nj, attr)
        if a == b:
            continue
        if a >= 0 and b > a:
            raised[i] = b
        elif a >= 0 and b < 0:
            raise ReloadRefused(
                "config reload not supported for jetstream max memory and max store"
            )
        elif a < 0:
            raise ReloadRefused(
                "config reload not supported for jetstream dynamic max memory and store"
            )
        else:
            raise ReloadRefused(
                "config reload not supported for decreasing jetstream max memory and store"
            )
    if raised != [None, None]:
        plan.js_store = (raised[0], raised[1])
        if raised[0] is not None:
            plan.notices.append(f"Reloaded: JetStream max_mem_store = {friendly_bytes(raised[0])}")
        if raised[1] is not None:
            plan.notices.append(f"Reloaded: JetStream max_file_store = {friendly_bytes(raised[1])}")


def _cluster(plan: Plan, a: Any, b: Any) -> None:
    if a == b:
        return
    if a is None or b is None:
        raise _refuse("Cluster", "set" if a else "", "set" if b else "")
    if a.host != b.host:
        raise ReloadRefused(
            f"config reload not supported for cluster host: old={a.host}, new={b.host}"
        )
    if a.port != b.port:
        raise ReloadRefused(
            f"config reload not supported for cluster port: old={a.port}, new={b.port}"
        )
    for f in dataclasses.fields(a):
        if f.name == "routes":
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x != y:
            shown = {"secret", "password"}
            if f.name in shown:
                x, y = "[REDACTED]", "[REDACTED]"
            raise _refuse(f"Cluster.{f.name}", x, y)
    if a.routes != b.routes:
        plan.routes_add = [r for r in b.routes if r not in a.routes]
        plan.routes_remove = [r for r in a.routes if r not in b.routes]
        plan.notices.append("Reloaded: cluster routes")
