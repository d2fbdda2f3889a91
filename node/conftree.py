"""Config file → :class:`~node.config.ServerConfig`: nats-server's conf keys, checked and typed.

Theory of operation
-------------------
:mod:`node.conffile` turns the file's text into a map of located values (:class:`ConfValue`:
value + ``file:line:col`` + whether it was used as a ``$variable``); this module walks that map
with :class:`_Builder` and writes into a :class:`ServerConfig` in place. :func:`apply_file` is
the entry point.

Config file keys follow nats-server ``server/opts.go``: same names and aliases, durations as Go
duration strings (a bare number of seconds is accepted with a warning where nats accepts it),
sizes with suffixes (see :mod:`node.conffile`). Like nats-server, an unknown key is an error
(``file:line:col: unknown field "x"``) unless the key was used as a ``$variable``. Keys that
nats-server knows but trijet does not implement (gateways, websockets, MQTT, …) are
accepted and reported in :attr:`ServerConfig.warnings`; :func:`node.logsetup.setup_logging`
logs them at WRN once logging is up. A bad value records its error and raises :class:`_Skip`,
which the enclosing block catches to go on with the next key, so all errors in a file are
collected and raised together as one :class:`ConfigError`, one ``file:line:col: reason`` per
line.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from node.confaccounts import check_accounts, read_accounts
from node.conffile import SIZE_SUFFIXES, ConfFileError, ConfMap, ConfValue, parse_file
from node.configtypes import (
    ClusterConfig,
    ConfigError,
    Permissions,
    ResponsePerms,
    ServerConfig,
    SubjectPerms,
    TLSConfig,
    UserSpec,
)
from node.confleaf import check_compression, check_leafnodes, read_leafnodes
from node.confvalues import (
    describe,
    is_user_nkey,
    parse_duration,
    split_host_port,
    v_s,
    valid_subject,
)

__all__ = ["apply_file"]

# ------------------------------------------------------------------------------------------------
# Config file → tree
# ------------------------------------------------------------------------------------------------

# Keys nats-server accepts that trijet does not implement: accepted, warned about, ignored.
_IGNORED_TOP = frozenset(
    """syslog remote_syslog log_size_limit logfile_size_limit log_max_num logfile_max_num
    prof_port prof_block_rate no_system_account no_system
    no_sys_acc resolver_tls resolver_pinned_accounts
    ocsp ocsp_cache gateway websocket ws mqtt server_metadata feature_flags
    default_js_domain mappings maps max_sub_tokens max_subscription_tokens max_traced_msg_len
    trace_headers trusted trusted_keys allow_non_tls proxy_protocol proxies default_sentinel
    write_timeout""".split()
)
_IGNORED_JS = frozenset(
    """key ek encryption_key prev_key prev_ek prev_encryption_key cipher extension_hint tpm
    max_outstanding_catchup max_buffered_size max_buffered_msgs request_queue_limit
    info_queue_limit meta_compact meta_compact_size meta_compact_sync max_concurrent_io""".split()
)
_IGNORED_CLUSTER = frozenset(
    """tls permissions accounts connect_backoff ping_interval ping_max
    write_deadline write_timeout""".split()
)
_IGNORED_TLS = frozenset(
    """insecure verify_cert_and_check_known_urls allow_insecure_cipher_suites cipher_suites
    curve_preferences connection_rate_limit pinned_certs cert_store cert_match
    cert_match_by ca_certs_match cert_match_skip_invalid ocsp_peer certs min_version
    handshake_first_fallback""".split()
)
_IGNORED_AUTH = frozenset({"auth_callout", "auth_hook", "proxy_required"})
_IGNORED_USER = frozenset(
    {"allowed_connection_types", "connection_types", "clients", "proxy_required"}
)


# Keys of JWT operator mode (accounts resolved from signed JWTs): refused, not ignored —
# ignoring an operator would drop authentication altogether.  ``accounts`` and
# ``system_account`` are read by :mod:`node.confaccounts`.
MULTI_ACCOUNT_KEYS = frozenset(
    """operator operators root roots root_operator root_operators resolver account_resolver
    accounts_resolver resolver_preload trusted trusted_keys""".split()
)


def multi_account_refusal(key: str) -> str:
    """The error for a ``MULTI_ACCOUNT_KEYS`` key (after ``file:line:col: ``)."""
    return (
        f'operator mode is not supported yet: field "{key}" needs accounts resolved from '
        "JWTs; configure accounts in an accounts block instead"
    )


class _Builder:
    """Reads a parsed conf map into a :class:`ServerConfig`, collecting errors and warnings."""

    def __init__(self, cfg: ServerConfig) -> None:
        self.cfg = cfg
        self.errors: list[str] = []
        self.auth_timeout_set = False
        self.account_users: list[UserSpec] = []

    # -- reporting and typed access ----------------------------------------------------------

    def err(self, cv: ConfValue, reason: str) -> None:
        self.errors.append(f"{cv.where}: {reason}")

    def err_at(self, where: str, reason: str) -> None:
        self.errors.append(f"{where}: {reason}")

    def unknown(self, key: str, cv: ConfValue, ignored: frozenset[str]) -> None:
        if key in ignored:
            self.cfg.warnings.append(
                f'{cv.where}: field "{key}" is not supported by trijet and is ignored'
            )
        elif not cv.used_as_variable:
            self.errors.append(f'{cv.where}: unknown field "{key}"')

    def typed(self, key: str, cv: ConfValue, kind: type, what: str) -> Any:
        v = cv.value
        ok = isinstance(v, kind) and not (kind is int and isinstance(v, bool))
        if kind is float and isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        if not ok:
            self.err(cv, f"{key}: expected {what}, got {describe(v)}")
            raise _Skip
        return v

    def string(self, key: str, cv: ConfValue) -> str:
        return str(self.typed(key, cv, str, "a string"))

    def integer(self, key: str, cv: ConfValue) -> int:
        return int(self.typed(key, cv, int, "an integer"))

    def boolean(self, key: str, cv: ConfValue) -> bool:
        return bool(self.typed(key, cv, bool, "a boolean"))

    def strings(self, key: str, cv: ConfValue) -> list[str]:
        """A string or an array of strings."""
        if isinstance(cv.value, str):
            return [cv.value]
        if isinstance(cv.value, list):
            out = []
            for item in cv.value:
                out.append(self.string(key, item))
            return out
        self.err(cv, f"{key}: expected a string or an array of strings, got {describe(cv.value)}")
        raise _Skip

    def block(self, key: str, cv: ConfValue) -> ConfMap:
        if not isinstance(cv.value, dict):
            self.err(cv, f"{key}: expected a map, got {describe(cv.value)}")
            raise _Skip
        return cv.value

    def duration(self, key: str, cv: ConfValue, *, seconds_ok: bool = True) -> float:
        """A Go duration string; a bare integer is seconds (with nats-server's warning)."""
        v = cv.value
        if isinstance(v, str):
            try:
                return parse_duration(v)
            except ValueError as exc:
                self.err(cv, f"error parsing {key}: {exc}")
                raise _Skip from None
        if seconds_ok and isinstance(v, int | float) and not isinstance(v, bool):
            self.cfg.warnings.append(
                f'{cv.where}: invalid use of field "{key}": {key} should be converted to a duration'
            )
            return float(v)
        self.err(cv, f'{key}: expected a duration string such as "2m", got {describe(v)}')
        raise _Skip

    def timeout(self, key: str, cv: ConfValue) -> float:
        """nats ``timeout`` fields: seconds as int/float, or a duration string."""
        v = cv.value
        if isinstance(v, str):
            try:
                return parse_duration(v)
            except ValueError as exc:
                self.err(cv, f"error parsing '{key}': {exc}")
                raise _Skip from None
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
        self.err(cv, f"'{key}' wrong type: {describe(v)}")
        raise _Skip

    def size(self, key: str, cv: ConfValue) -> int:
        v = cv.value
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, str):
            m = re.fullmatch(r"\s*(-?\d+)\s*([A-Za-z]*)\s*", v)
            if m and m.group(2).lower() in SIZE_SUFFIXES:
                return int(m.group(1)) * SIZE_SUFFIXES[m.group(2).lower()]
        self.err(cv, f"{key}: expected a size such as 1GB, got {describe(v)}")
        raise _Skip

    def listen(self, key: str, cv: ConfValue) -> tuple[str | None, int]:
        v = cv.value
        if isinstance(v, int) and not isinstance(v, bool):
            return None, v
        if isinstance(v, str):
            try:
                host, port = split_host_port(v)
            except ValueError as exc:
                self.err(cv, str(exc))
                raise _Skip from None
            return host or None, port
        self.err(cv, f"expected port or host:port, got {describe(v)}")
        raise _Skip

    # -- top level ---------------------------------------------------------------------------

    def apply(self, top: ConfMap) -> None:
        for key, cv in top.items():
            try:
                self.top_key(key.lower(), key, cv)
            except _Skip:
                pass
        check_accounts(self, top, self.account_users)
        check_leafnodes(self)
        if self.cfg.tls is not None and not self.auth_timeout_set:
            self.cfg.auth.timeout_s = self.cfg.tls.timeout_s + 1.0

    def top_key(self, k: str, key: str, cv: ConfValue) -> None:
        cfg = self.cfg
        if k in MULTI_ACCOUNT_KEYS:
            self.err(cv, multi_account_refusal(key))
            raise _Skip
        if k == "accounts":
            read_accounts(self, cv, self.account_users)
            return
        if k in ("system_account", "system"):
            cfg.system_account = self.string(k, cv)
            return
        setters: dict[str, Callable[[], None]] = {
            "client_advertise": lambda: setattr(cfg, "client_advertise", self.string(k, cv)),
            "port": lambda: setattr(cfg, "port", self.integer(k, cv)),
            "host": lambda: setattr(cfg, "host", self.string(k, cv)),
            "net": lambda: setattr(cfg, "host", self.string(k, cv)),
            "debug": lambda: setattr(cfg, "debug", self.boolean(k, cv)),
            "trace": lambda: setattr(cfg, "trace", self.boolean(k, cv)),
            "logtime": lambda: setattr(cfg, "logtime", self.boolean(k, cv)),
            "logtime_utc": lambda: setattr(cfg, "logtime_utc", self.boolean(k, cv)),
            "log_file": lambda: setattr(cfg, "log_file", self.string(k, cv)),
            "logfile": lambda: setattr(cfg, "log_file", self.string(k, cv)),
            "pid_file": lambda: setattr(cfg, "pid_file", self.string(k, cv)),
            "pidfile": lambda: setattr(cfg, "pid_file", self.string(k, cv)),
            "ports_file_dir": lambda: setattr(cfg, "ports_file_dir", self.string(k, cv)),
            "http_port": lambda: setattr(cfg, "http_port", self.integer(k, cv)),
            "monitor_port": lambda: setattr(cfg, "http_port", self.integer(k, cv)),
            "https_port": lambda: setattr(cfg, "https_port", self.integer(k, cv)),
            "http_base_path": lambda: setattr(cfg, "http_base_path", self.string(k, cv)),
            "max_pending": lambda: setattr(cfg, "max_pending", self.integer(k, cv)),
            "max_connections": lambda: setattr(cfg, "max_connections", self.integer(k, cv)),
            "max_conn": lambda: setattr(cfg, "max_connections", self.integer(k, cv)),
            "max_subscriptions": lambda: setattr(cfg, "max_subscriptions", self.integer(k, cv)),
            "max_subs": lambda: setattr(cfg, "max_subscriptions", self.integer(k, cv)),
            "ping_interval": lambda: setattr(cfg, "ping_interval_s", self.duration(k, cv)),
            "ping_max": lambda: setattr(cfg, "ping_max", self.integer(k, cv)),
            "write_deadline": lambda: setattr(cfg, "write_deadline_s", self.duration(k, cv)),
            "no_auth_user": lambda: setattr(cfg.auth, "no_auth_user", self.string(k, cv)),
            "no_header_support": lambda: setattr(cfg, "no_header_support", self.boolean(k, cv)),
            "disable_sublist_cache": lambda: setattr(
                cfg, "disable_sublist_cache", self.boolean(k, cv)
            ),
            "no_sublist_cache": lambda: setattr(cfg, "disable_sublist_cache", self.boolean(k, cv)),
            "no_fast_producer_stall": lambda: setattr(
                cfg, "no_fast_producer_stall", self.boolean(k, cv)
            ),
            "max_closed_clients": lambda: setattr(cfg, "max_closed_clients", self.integer(k, cv)),
            "connect_error_reports": lambda: setattr(
                cfg, "connect_error_reports", self.integer(k, cv)
            ),
            "reconnect_error_reports": lambda: setattr(
                cfg, "reconnect_error_reports", self.integer(k, cv)
            ),
            "server_tags": lambda: setattr(
                cfg, "server_tags", [t.strip() for t in self.strings(k, cv)]
            ),
            "authorization": lambda: self.authorization(cv),
            "tls": lambda: setattr(cfg, "tls", self.tls(cv)),
            "cluster": lambda: self.cluster_block(cv),
            "leafnodes": lambda: read_leafnodes(self, cv, _Skip),
            "leaf": lambda: read_leafnodes(self, cv, _Skip),
            "jetstream": lambda: self.jetstream(cv),
        }
        if k in setters:
            setters[k]()
        elif k == "listen":
            host, port = self.listen(k, cv)
            cfg.host = host or cfg.host
            cfg.port = port
        elif k in ("http", "https"):
            host, port = self.listen(k, cv)
            if host:
                cfg.http_host = host
            if k == "http":
                cfg.http_port = port
            else:
                cfg.https_port = port
        elif k == "server_name":
            name = self.string(k, cv)
            if " " in name:
                self.err(cv, "server name cannot contain spaces")
            else:
                cfg.server_name = name
        elif k == "trace_verbose":
            cfg.trace_verbose = self.boolean(k, cv)
            cfg.trace = cfg.trace_verbose
        elif k in ("max_payload", "max_control_line"):
            n = self.integer(k, cv)
            if n > 2**31 - 1:
                self.err(cv, f"{key} value is too big")
            else:
                setattr(cfg, k, n)
        elif k in ("lame_duck_duration", "lame_duck_grace_period"):
            d = self.duration(k, cv, seconds_ok=False)
            if k == "lame_duck_duration" and d < 30:
                self.err(cv, f"invalid lame_duck_duration of {v_s(d)}, minimum is 30 seconds")
            elif d < 0:
                self.err(cv, "invalid lame_duck_grace_period, needs to be positive")
            else:
                setattr(cfg, k + "_s", d)
        elif k in ("store_dir", "storedir"):
            if cfg.jetstream.store_dir:
                self.err(cv, "Duplicate 'store_dir' configuration")
            else:
                cfg.jetstream.store_dir = self.string(k, cv)
        else:
            self.unknown(key, cv, _IGNORED_TOP)

    # -- authorization -----------------------------------------------------------------------

    def authorization(self, cv: ConfValue) -> None:
        auth = self.cfg.auth
        block = self.block("authorization", cv)
        users_given = False
        for key, v in block.items():
            k = key.lower()
            try:
                if k in ("user", "username"):
                    auth.user = self.string(k, v)
                elif k in ("pass", "password"):
                    auth.password = self.string(k, v)
                elif k == "token":
                    auth.token = self.string(k, v)
                elif k == "timeout":
                    auth.timeout_s = self.timeout(k, v)
                    self.auth_timeout_set = True
                elif k == "users":
                    users_given = True
                    auth.users = self.users(v)
                elif k in ("default_permission", "default_permissions", "permissions"):
                    auth.default_permissions = self.permissions(v)
                else:
                    self.unknown(key, v, _IGNORED_AUTH)
            except _Skip:
                pass
        if auth.default_permissions is not None:
            for u in auth.users:
                if u.permissions is None:
                    u.permissions = auth.default_permissions
        if (auth.user or auth.password) and auth.token:
            self.err(cv, "Cannot have a user/pass and token")
        if users_given and auth.user:
            self.err(cv, "Can not have a single user/pass and a users array")
        if users_given and auth.token:
            self.err(cv, "Can not have a token and a users array")
        seen: set[str] = set()
        for u in auth.users:
            name = u.nkey or u.user or ""
            if name in seen:
                what = "nkey" if u.nkey else "user"
                self.err(cv, f'Duplicate {what} "{name}" detected')
            seen.add(name)

    def users(self, cv: ConfValue) -> list[UserSpec]:
        if not isinstance(cv.value, list):
            self.err(cv, f"Expected users field to be an array, got {describe(cv.value)}")
            raise _Skip
        out = []
        for entry in cv.value:
            if not isinstance(entry.value, dict):
                self.err(entry, "Expected user entry to be a map/struct")
                continue
            spec = UserSpec()
            for key, v in entry.value.items():
                k = key.lower()
                try:
                    if k == "nkey":
                        spec.nkey = self.string(k, v)
                    elif k in ("user", "username"):
                        spec.user = self.string(k, v)
                    elif k in ("pass", "password"):
                        spec.password = self.string(k, v)
                    elif k in ("permission", "permissions", "authorization"):
                        spec.permissions = self.permissions(v)
                    else:
                        self.unknown(key, v, _IGNORED_USER)
                except _Skip:
                    pass
            if not spec.nkey and not spec.user:
                self.err(entry, "User entry requires a user")
            elif spec.nkey and not is_user_nkey(spec.nkey):
                self.err(entry, "Not a valid public nkey for a user")
            elif spec.nkey and (spec.user or spec.password):
                self.err(entry, "Nkey users do not take usernames or passwords")
            else:
                out.append(spec)
        return out

    def permissions(self, cv: ConfValue) -> Permissions:
        block = self.block("permissions", cv)
        perms = Permissions()
        for key, v in block.items():
            k = key.lower()
            try:
                if k in ("pub", "publish", "import"):
                    perms.publish = self.subject_perms(v, allow_queue=False)
                elif k in ("sub", "subscribe", "export"):
                    perms.subscribe = self.subject_perms(v, allow_queue=True)
                elif k in ("allow_responses", "publish_allow_responses"):
                    perms.allow_responses = self.response_perms(v)
                elif not v.used_as_variable:
                    self.err(v, f'Unknown field "{key}" parsing permissions')
            except _Skip:
                pass
        if perms.allow_responses is not None:
            if perms.publish is None:
                perms.publish = SubjectPerms()
            if perms.publish.allow is None:
                perms.publish.allow = []  # responses only, as nats-server does
        return perms

    def subject_perms(self, cv: ConfValue, *, allow_queue: bool) -> SubjectPerms:
        if isinstance(cv.value, dict):
            sp = SubjectPerms()
            for key, v in cv.value.items():
                k = key.lower()
                if k == "allow":
                    sp.allow = self.subjects(v, allow_queue)
                elif k == "deny":
                    sp.deny = self.subjects(v, allow_queue)
                elif not v.used_as_variable:
                    self.err(
                        v,
                        f'Unknown field name "{key}" parsing subject permissions, '
                        "only 'allow' or 'deny' are permitted",
                    )
            return sp
        return SubjectPerms(allow=self.subjects(cv, allow_queue))

    def subjects(self, cv: ConfValue, allow_queue: bool) -> list[str]:
        subjects = self.strings("permissions", cv)
        for s in subjects:
            parts = s.split()
            ok = valid_subject(s) or (
                allow_queue and len(parts) == 2 and all(valid_subject(p) for p in parts)
            )
            if not ok:
                self.err(cv, f'subject "{s}" is not a valid subject')
                raise _Skip
        return subjects

    def response_perms(self, cv: ConfValue) -> ResponsePerms | None:
        if isinstance(cv.value, bool):
            return ResponsePerms() if cv.value else None
        if not isinstance(cv.value, dict):
            self.err(cv, "error parsing response permissions, expected a boolean or a map")
            raise _Skip
        rp = ResponsePerms()
        for key, v in cv.value.items():
            k = key.lower()
            if k in ("max", "max_msgs", "max_messages", "max_responses"):
                n = self.integer(k, v)
                if n != 0:  # 0 means default; negative means unlimited
                    rp.max_msgs = n
            elif k in ("expires", "expiration", "ttl"):
                if not isinstance(v.value, str):
                    self.err(v, "error parsing expires, not a duration string")
                    raise _Skip
                d = self.duration(k, v, seconds_ok=False)
                if d != 0:
                    rp.expires_s = d
            elif not v.used_as_variable:
                self.err(v, f'Unknown field "{key}" parsing permissions')
        return rp

    # -- tls ---------------------------------------------------------------------------------

    def tls(self, cv: ConfValue) -> TLSConfig | None:
        block = self.block("tls", cv)
        values: dict[str, Any] = {}
        for key, v in block.items():
            k = key.lower()
            try:
                if k in ("cert_file", "key_file", "ca_file"):
                    values[k] = self.string(k, v)
                elif k == "verify":
                    values["verify"] = self.boolean(k, v)
                elif k == "verify_and_map":
                    if self.boolean(k, v):
                        values["verify"] = True
                    self.unknown(key, v, frozenset({key}))  # mapping itself: warn
                elif k == "timeout":
                    values["timeout_s"] = self.timeout(k, v)
                elif k == "handshake_first":
                    hv = v.value
                    values["handshake_first"] = (
                        hv if isinstance(hv, bool) else isinstance(hv, str) and hv != ""
                    )
                else:
                    self.unknown(key, v, _IGNORED_TLS)
            except _Skip:
                pass
        if "cert_file" not in values or "key_file" not in values:
            self.err(cv, "tls: 'cert_file' and 'key_file' are required")
            return None
        return TLSConfig(**values)

    # -- cluster -----------------------------------------------------------------------------

    def cluster_block(self, cv: ConfValue) -> None:
        block = self.block("cluster", cv)
        cl = self.cfg.cluster or ClusterConfig()
        auth_timeout_set = False
        tls_timeout: float | None = None
        for key, v in block.items():
            k = key.lower()
            try:
                if k == "name":
                    name = self.string(k, v)
                    if " " in name:
                        self.err(v, "cluster name cannot contain spaces")
                    cl.name = name
                elif k == "listen":
                    host, port = self.listen(k, v)
                    cl.host = host or cl.host
                    cl.port = port
                elif k == "port":
                    cl.port = self.integer(k, v)
                elif k in ("host", "net"):
                    cl.host = self.string(k, v)
                elif k == "authorization":
                    for akey, av in self.block(k, v).items():
                        ak = akey.lower()
                        if ak in ("user", "username"):
                            cl.user = self.string(ak, av)
                        elif ak in ("pass", "password"):
                            cl.password = self.string(ak, av)
                        elif ak == "timeout":
                            cl.auth_timeout_s = self.timeout(ak, av)
                            auth_timeout_set = True
                        elif ak == "users":
                            self.err(av, "Cluster authorization does not allow multiple users")
                        elif ak == "token":
                            self.err(av, "Cluster authorization does not support tokens")
                        else:
                            self.unknown(akey, av, frozenset({"permissions"}))
                elif k == "routes":
                    cl.routes = self.strings(k, v)
                elif k in ("advertise", "cluster_advertise"):
                    cl.advertise = self.string(k, v)
                elif k == "no_advertise":
                    cl.no_advertise = self.boolean(k, v)
                elif k == "connect_retries":
                    cl.connect_retries = self.integer(k, v)
                elif k == "pool_size":
                    cl.pool_size = self.integer(k, v)
                elif k == "secret":
                    cl.secret = self.string(k, v)
                elif k == "compression":  # off/accept: what trijet's routes do; s2 refused
                    check_compression(self, v, "cluster")
                else:
                    if k == "tls" and isinstance(v.value, dict) and "timeout" in v.value:
                        tls_timeout = self.timeout("timeout", v.value["timeout"])
                    self.unknown(key, v, _IGNORED_CLUSTER)
            except _Skip:
                pass
        if tls_timeout is not None and not auth_timeout_set:
            cl.auth_timeout_s = tls_timeout + 1.0
        self.cfg.cluster = cl

    # -- jetstream ---------------------------------------------------------------------------

    def jetstream(self, cv: ConfValue) -> None:
        js = self.cfg.jetstream
        v = cv.value
        if isinstance(v, bool):
            js.enabled = v
            return
        if isinstance(v, str):
            if v.lower() in ("enabled", "enable"):
                js.enabled = True
            elif v.lower() in ("disabled", "disable"):
                js.enabled = False
            else:
                self.err(cv, f"Expected 'enabled' or 'disabled' for string value, got '{v}'")
            return
        if not isinstance(v, dict):
            self.err(cv, f"Expected map, bool or string to define JetStream, got {describe(v)}")
            return
        enable = True
        for key, mv in v.items():
            k = key.lower()
            try:
                if k == "strict":
                    js.strict = self.boolean(k, mv)
                elif k in ("store", "store_dir", "storedir"):
                    if js.store_dir:
                        self.err(mv, "Duplicate 'store_dir' configuration")
                    else:
                        js.store_dir = self.string(k, mv)
                elif k in ("sync", "sync_interval"):
                    if isinstance(mv.value, str) and mv.value.lower() == "always":
                        js.sync_interval = "always"
                    else:
                        js.sync_interval = self.duration(k, mv)
                elif k in ("max_memory_store", "max_mem_store", "max_mem"):
                    js.max_memory_store = self.size(k, mv)
                elif k in ("max_file_store", "max_file"):
                    js.max_file_store = self.size(k, mv)
                elif k == "domain":
                    js.domain = self.string(k, mv)
                elif k in ("enable", "enabled"):
                    enable = self.boolean(k, mv)
                elif k == "unique_tag":
                    js.unique_tag = self.string(k, mv).strip().lower()
                elif k == "limits":
                    self.js_limits(mv)
                elif k == "raft_journal_entries_max":  # trijet extension
                    js.raft_journal_entries_max = max(self.integer(k, mv), 2)
                elif k == "raft_journal_bytes_max":  # trijet extension
                    js.raft_journal_bytes_max = max(self.size(k, mv), 1)
                elif k == "raft_leader_write_overlap":  # trijet extension
                    js.raft_leader_write_overlap = self.boolean(k, mv)
                else:
                    self.unknown(key, mv, _IGNORED_JS)
            except _Skip:
                pass
        js.enabled = enable

    def js_limits(self, cv: ConfValue) -> None:
        js = self.cfg.jetstream
        for key, v in self.block("limits", cv).items():
            k = key.lower()
            try:
                if k in ("max_ack_pending", "max_ha_assets", "max_request_batch"):
                    js.limits[k] = self.integer(k, v)
                    if k == "max_ha_assets":
                        js.max_ha_assets = js.limits[k]
                elif k == "duplicate_window":
                    js.limits[k] = self.duration(k, v, seconds_ok=False)
                elif k == "batch":
                    js.limits[k] = v.plain()
                    self.unknown(key, v, frozenset({key}))
                else:
                    self.unknown(key, v, frozenset())
            except _Skip:
                pass


class _Skip(Exception):
    """A value was bad; the error is recorded; go on with the next key."""


def _digest(top: ConfMap) -> str:
    plain = {k: v.plain() for k, v in top.items()}
    body = json.dumps(plain, sort_keys=True, default=str).encode()
    return "sha256:" + hashlib.sha256(body).hexdigest()


def apply_file(cfg: ServerConfig, path: str, *, env: dict[str, str] | None = None) -> None:
    """Read ``path`` into ``cfg`` (in place).

    Raises:
        ConfigError: syntax errors, unknown fields, bad values — all of them, one per line.
    """
    try:
        top = parse_file(path, env=env)
    except ConfFileError as exc:
        raise ConfigError(str(exc)) from None
    cfg.config_file = path
    cfg.config_digest = _digest(top)
    if not top:
        cfg.warnings.append(f"{path}: config has no values or is empty")
    builder = _Builder(cfg)
    builder.apply(top)
    if builder.errors:
        raise ConfigError("\n".join(builder.errors))
