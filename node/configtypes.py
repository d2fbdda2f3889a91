"""The typed configuration tree: every setting trijet-server reads, and every default.

Theory of operation
-------------------
:class:`ServerConfig` is the only configuration object the rest of the server reads; every
default lives in the dataclass fields below, nowhere else (``deploy/`` and ``dev_defaults`` only
override them). The tree is plain data: it is filled in by :mod:`node.conftree` (a conf file)
and :mod:`node.flags` (the command line), both of which report problems as
:class:`ConfigError`; ``-h``/``-v``/``-t`` are :class:`ConfigExit`. This module imports nothing
of trijet so that both fillers and the :mod:`node.config` facade can depend on it without a
cycle. Import these names from :mod:`node.config`.

Deviations from the brief that follow nats-server: ``allow_responses`` expires after 2 minutes
by default; ``SubjectPerms.allow`` is ``None`` when not given (everything allowed) and ``[]``
when nothing is allowed (what ``allow_responses`` implies for publish); the auth timeout is
``tls.timeout_s + 1`` when TLS is on and no timeout was configured.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Literal

EXE = "trijet-server"


class ConfigError(Exception):
    """Bad flags, bad config file, bad value. The message is ready to print after ``EXE: ``."""


class ConfigExit(Exception):
    """``-h``, ``-v`` or ``-t``: print :attr:`text` to :attr:`stream` and exit with :attr:`code`."""

    def __init__(self, code: int, text: str, stream: Literal["stdout", "stderr"]) -> None:
        super().__init__(text)
        self.code = code
        self.text = text
        self.stream = stream


# ------------------------------------------------------------------------------------------------
# The tree
# ------------------------------------------------------------------------------------------------


@dataclass
class SubjectPerms:
    """Allow/deny subject lists. ``allow=None``: everything not denied is allowed."""

    allow: list[str] | None = None
    deny: list[str] = field(default_factory=list)


@dataclass
class ResponsePerms:
    """``allow_responses``: publish to reply subjects of received requests."""

    max_msgs: int = 1
    expires_s: float = 120.0


@dataclass
class Permissions:
    publish: SubjectPerms | None = None
    subscribe: SubjectPerms | None = None
    allow_responses: ResponsePerms | None = None


@dataclass
class UserSpec:
    user: str | None = None
    password: str | None = None
    nkey: str | None = None
    permissions: Permissions | None = None
    #: the account the user belongs to (``$G`` for top-level ``authorization`` users)
    account: str = "$G"


@dataclass
class AuthConfig:
    user: str | None = None
    password: str | None = None
    token: str | None = None
    users: list[UserSpec] = field(default_factory=list)
    timeout_s: float = 2.0
    no_auth_user: str | None = None
    default_permissions: Permissions | None = None

    @property
    def enabled(self) -> bool:
        """True when clients must authenticate."""
        return bool(self.user or self.token or self.users)


@dataclass
class ExportSpec:
    """One ``exports`` entry: a stream or service an account offers."""

    kind: Literal["stream", "service"]
    subject: str
    #: None: public; else the accounts allowed to import it
    accounts: list[str] | None = None
    #: service response type: "Singleton", "Stream" or "Chunked"
    response: str = "Singleton"
    #: how long a stream/chunked service's responses are forwarded
    response_threshold_s: float = 120.0


@dataclass
class ImportSpec:
    """One ``imports`` entry: ``subject`` of ``account``'s export seen locally as ``to``."""

    kind: Literal["stream", "service"]
    account: str
    subject: str
    #: the local subject (None: the same as ``subject``; a stream ``prefix`` is folded in)
    to: str | None = None
    where: str = ""  # file:line:col, for errors found once every account is read


@dataclass
class AccountSpec:
    """One ``accounts { NAME: {...} }`` entry (its users are in :attr:`AuthConfig.users`)."""

    name: str
    #: ``jetstream: enabled`` (or a map without ``enabled: false``) in the account block
    jetstream: bool = False
    exports: list[ExportSpec] = field(default_factory=list)
    imports: list[ImportSpec] = field(default_factory=list)
    #: ``jetstream: {max_mem, max_file, max_streams, max_consumers, max_ack_pending}``
    #: by nats-server's JSON names (max_memory, max_storage, …); absent: unlimited (-1)
    js_limits: dict[str, int] = field(default_factory=dict)


@dataclass
class TLSConfig:
    cert_file: str
    key_file: str
    ca_file: str | None = None
    verify: bool = False
    timeout_s: float = 2.0
    handshake_first: bool = False


@dataclass
class JetStreamConfig:
    """JetStream settings. ``store_dir`` is what was configured; see :attr:`jetstream_dir`."""

    enabled: bool = False
    store_dir: str | None = None
    max_memory_store: int = -1
    max_file_store: int = -1
    domain: str | None = None
    #: None: not configured -- trijet syncs each batch before acknowledging
    #: (as ``"always"``); seconds: the user's lazier interval mode
    sync_interval: Literal["always"] | float | None = None
    unique_tag: str | None = None
    strict: bool = True
    max_ha_assets: int = 0
    limits: dict[str, Any] = field(default_factory=dict)
    #: trijet extension: a replicated stream's Raft journal is compacted by a
    #: state snapshot past this many entries or bytes (file storage)
    raft_journal_entries_max: int = 50_000
    raft_journal_bytes_max: int = 64 * 1024 * 1024
    #: trijet extension: a stream leader's journal write overlaps its next
    #: cycles, the followers' fsynced copies commit without it (raft.driver)
    raft_leader_write_overlap: bool = False

    @property
    def jetstream_dir(self) -> str:
        """Where JetStream files go: ``<store_dir>/jetstream``, as nats-server does.

        Without a store dir: ``<tmp>/nats/jetstream`` (nats-server's default).
        """
        if self.store_dir:
            return os.path.join(self.store_dir, "jetstream")
        return os.path.join(tempfile.gettempdir(), "nats", "jetstream")


@dataclass
class ClusterConfig:
    name: str | None = None
    host: str = "0.0.0.0"
    port: int = 6222
    routes: list[str] = field(default_factory=list)
    user: str | None = None
    password: str | None = None
    auth_timeout_s: float = 2.0
    no_advertise: bool = False
    connect_retries: int = 0
    advertise: str | None = None
    pool_size: int = 3
    secret: str | None = None  # trijet extension: shared secret for Raft peer links


@dataclass
class LeafRemote:
    """One ``leafnodes { remotes: [...] }`` entry: a hub this server solicits."""

    urls: list[str] = field(default_factory=list)
    #: the local account bound to the link (``$G`` when not set)
    account: str | None = None
    #: ``tls {}``: the link is TLS (``cert_file``/``key_file`` empty: no client certificate)
    tls: TLSConfig | None = None


@dataclass
class LeafUser:
    """One of ``leafnodes { authorization { users: [...] } }``: a leaf's credentials and
    the account its link is bound to."""

    user: str
    password: str
    account: str | None = None


@dataclass
class LeafConfig:
    """The ``leafnodes {}`` block: a listener for leafs (``port`` > 0 or -1) and remotes."""

    host: str = "0.0.0.0"
    port: int = 0  # 0: no listener; -1: random port
    user: str | None = None
    password: str | None = None
    #: the account an authenticated leaf is bound to (``$G`` when not set)
    account: str | None = None
    #: several leaf users, each bound to its account (instead of ``user``/``password``)
    users: list[LeafUser] = field(default_factory=list)
    auth_timeout_s: float = 2.0
    remotes: list[LeafRemote] = field(default_factory=list)
    #: delay before redialling a remote whose link dropped (nats-server: 1 s)
    reconnect_s: float = 1.0
    #: ``tls {}`` of the listener: every accepted link is TLS
    tls: TLSConfig | None = None


@dataclass
class ServerConfig:
    host: str = "0.0.0.0"
    port: int = 4222  # -1: random port
    server_name: str | None = None
    client_advertise: str | None = None
    http_host: str | None = None  # None: same as host
    http_port: int = 0  # 0: monitoring off; -1: random
    https_port: int = 0
    http_base_path: str = ""
    max_payload: int = 1048576
    max_control_line: int = 4096
    max_pending: int = 67108864
    max_connections: int = 65536
    max_subscriptions: int = 0  # 0: unlimited
    ping_interval_s: float = 120.0
    ping_max: int = 2
    write_deadline_s: float = 10.0
    lame_duck_duration_s: float = 120.0
    lame_duck_grace_period_s: float = 10.0
    debug: bool = False
    trace: bool = False
    trace_verbose: bool = False
    logtime: bool = True
    logtime_utc: bool = False
    log_file: str | None = None
    pid_file: str | None = None
    ports_file_dir: str | None = None
    no_header_support: bool = False
    disable_sublist_cache: bool = False
    #: drop a message for a backed-up consumer instead of stalling its client producer
    no_fast_producer_stall: bool = False
    server_tags: list[str] = field(default_factory=list)
    max_closed_clients: int = 10000
    connect_error_reports: int = 3600  # accepted; trijet has no solicited connections to report
    reconnect_error_reports: int = 1
    auth: AuthConfig = field(default_factory=AuthConfig)
    #: configured accounts by name (``$G`` and the system account exist without an entry)
    accounts: dict[str, AccountSpec] = field(default_factory=dict)
    system_account: str = "$SYS"
    tls: TLSConfig | None = None
    jetstream: JetStreamConfig = field(default_factory=JetStreamConfig)
    cluster: ClusterConfig | None = None
    leafnodes: LeafConfig | None = None
    config_file: str | None = None
    config_digest: str | None = None
    warnings: list[str] = field(default_factory=list)  # to log once logging is set up
    #: the command-line flags (``node.flags.parse_flags``), applied again over the file on
    #: a configuration reload
    flags: dict[str, Any] = field(default_factory=dict)
    #: the defaults a reload starts from: ``"server"`` (``trijet-server``) or ``"dev"``
    #: (``trijet serve``)
    defaults: Literal["server", "dev"] = "server"

    @property
    def monitor_host(self) -> str:
        """The host the monitoring endpoint binds to."""
        return self.http_host if self.http_host is not None else self.host
