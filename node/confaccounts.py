"""Config file: the ``accounts`` block, ``system_account`` and the checks that span accounts.

Theory of operation: :mod:`node.conftree`'s builder hands the ``accounts`` value here
(:func:`read_accounts`); each account becomes an :class:`AccountSpec` and its users join
:attr:`AuthConfig.users` tagged with the account's name, next to the top-level
``authorization`` users (account ``$G``).  :func:`check_accounts` runs once the whole file is
read and applies nats-server's cross-key rules: the system account must exist, a user name or
nkey is unique over every account, ``no_auth_user`` names a configured user.

Exports and imports are read into ``ExportSpec``/``ImportSpec`` (a stream import's ``prefix``
folded into its local subject) and checked as nats-server checks them: the exporting account
exists and one of its exports of the same kind covers the subject and admits the importer.

What trijet does not do yet is refused with an error that names it, never ignored (an ignored
mapping would deliver on the wrong subjects, an ignored limit would let one tenant fill the
disk): account ``mappings``, per-account JetStream fields other than max_mem, max_file,
max_streams and max_consumers (``max_ack_pending`` among them).  JetStream may be enabled in
several accounts, on one server and in a cluster alike (one JetStream service per account; a
cluster's meta layer keys its assignments by account and stream name).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from node.conffile import ConfValue
from node.configtypes import AccountSpec, ExportSpec, ImportSpec, ServerConfig, UserSpec
from node.confvalues import describe, valid_subject

if TYPE_CHECKING:
    from node.conftree import _Builder

GLOBAL_ACCOUNT = "$G"
DEFAULT_SYSTEM_ACCOUNT = "$SYS"

#: account keys trijet refuses (they would need subject mapping)
_REFUSED_ACCOUNT_KEYS = {
    "mappings": "account subject mappings",
    "maps": "account subject mappings",
}
_RESPONSE_TYPES = {"singleton": "Singleton", "stream": "Stream", "chunked": "Chunked"}
#: export/import keys nats-server accepts that change no message trijet delivers
_IGNORED_EXPORT_KEYS = frozenset(
    {"latency", "account_token_position", "advertise", "allow_trace", "description", "info_url"}
)
_IGNORED_IMPORT_KEYS = frozenset({"share", "allow_trace"})
#: account keys nats-server accepts that change nothing trijet does
_IGNORED_ACCOUNT_KEYS = frozenset({"nkey", "msg_trace", "trace_dest"})


def read_accounts(b: _Builder, cv: ConfValue, users_out: list[UserSpec]) -> None:
    """Read the ``accounts`` value (a map of name -> block, or an array of names)."""
    cfg = b.cfg
    v = cv.value
    if isinstance(v, list):
        for item in v:
            name = b.string("accounts", item)
            _add(b, cfg, item, name)
        return
    if not isinstance(v, dict):
        b.err(cv, f"Expected map or array to define accounts, got {_kind(v)}")
        return
    for name, acv in v.items():
        spec = _add(b, cfg, acv, name)
        if spec is None:
            continue
        if not isinstance(acv.value, dict):
            b.err(acv, f"Expected map entries for accounts, got {_kind(acv.value)}")
            continue
        _account_block(b, spec, acv.value, users_out)


def _add(b: _Builder, cfg: ServerConfig, cv: ConfValue, name: str) -> AccountSpec | None:
    if not name:
        b.err(cv, "account name can not be empty")
        return None
    if name == GLOBAL_ACCOUNT:
        b.err(cv, f'"{GLOBAL_ACCOUNT}" is a reserved account')
        return None
    if name in cfg.accounts:
        b.err(cv, f'Duplicate Account Entry: "{name}"')
        return None
    spec = AccountSpec(name)
    cfg.accounts[name] = spec
    return spec


def _account_block(
    b: _Builder, spec: AccountSpec, block: dict[str, Any], users_out: list[UserSpec]
) -> None:
    from node.conftree import _Skip

    default_perms = None
    users: list[UserSpec] = []
    for key, v in block.items():
        k = key.lower()
        try:
            if k == "users":
                users = b.users(v)
            elif k in ("default_permission", "default_permissions"):
                default_perms = b.permissions(v)
            elif k == "jetstream":
                spec.jetstream = _account_jetstream(b, spec, v)
            elif k == "exports":
                spec.exports = _exports(b, v)
            elif k == "imports":
                spec.imports = _imports(b, v)
            elif k in _REFUSED_ACCOUNT_KEYS:
                b.err(
                    v,
                    f"{_REFUSED_ACCOUNT_KEYS[k]} are not supported yet (account "
                    f'"{spec.name}"): trijet would deliver on the unmapped subjects',
                )
            else:
                b.unknown(key, v, _IGNORED_ACCOUNT_KEYS)
        except _Skip:
            pass
    for u in users:
        u.account = spec.name
        if u.permissions is None:
            u.permissions = default_perms
    users_out.extend(users)


def _entries(b: _Builder, key: str, cv: ConfValue) -> list[ConfValue]:
    if not isinstance(cv.value, list):
        b.err(cv, f"{key} should be an array, got {_kind(cv.value)}")
        return []
    out = []
    for entry in cv.value:
        if not isinstance(entry.value, dict):
            b.err(entry, f"{key} entry should be a map, got {_kind(entry.value)}")
        else:
            out.append(entry)
    return out


def _subject(b: _Builder, key: str, cv: ConfValue) -> str | None:

    subject = b.string(key, cv)
    if not valid_subject(subject):
        b.err(cv, f'invalid subject "{subject}" in {key}')
        return None
    return subject


def _exports(b: _Builder, cv: ConfValue) -> list[ExportSpec]:
    """``exports: [{stream: S} | {service: S, response: …}, accounts: [...]]``."""
    from node.conftree import _Skip

    out: list[ExportSpec] = []
    for entry in _entries(b, "exports", cv):
        spec: ExportSpec | None = None
        accounts: list[str] | None = None
        response: str | None = None
        threshold: float | None = None
        for key, v in entry.value.items():
            k = key.lower()
            try:
                if k in ("stream", "service"):
                    if spec is not None:
                        b.err(v, "Detected stream and service in one export")
                        continue
                    subject = _subject(b, k, v)
                    if subject is not None:
                        spec = ExportSpec("stream" if k == "stream" else "service", subject)
                elif k == "accounts":
                    accounts = b.strings(k, v)
                elif k in ("response", "response_type"):
                    rt = b.string(k, v)
                    response = _RESPONSE_TYPES.get(rt.lower())
                    if response is None:
                        b.err(v, f'Unknown response type: "{rt}"')
                elif k == "response_threshold":
                    threshold = b.duration(k, v, seconds_ok=False)
                else:
                    b.unknown(key, v, _IGNORED_EXPORT_KEYS)
            except _Skip:
                pass
        if spec is None:
            b.err(entry, "Expected a stream or service in export")
            continue
        if spec.kind == "stream" and (response is not None or threshold is not None):
            b.err(entry, "Detected response directive on non-service")
            continue
        spec.accounts = accounts
        if response is not None:
            spec.response = response
        if threshold is not None:
            spec.response_threshold_s = threshold
        out.append(spec)
    return out


def _imports(b: _Builder, cv: ConfValue) -> list[ImportSpec]:
    """``imports: [{stream: {account, subject}, prefix|to} | {service: {...}, to}]``."""
    from node.conftree import _Skip

    out: list[ImportSpec] = []
    for entry in _entries(b, "imports", cv):
        spec: ImportSpec | None = None
        prefix: str | None = None
        to: str | None = None
        for key, v in entry.value.items():
            k = key.lower()
            try:
                if k in ("stream", "service"):
                    src = b.block(k, v)
                    acc = src.get("account")
                    subj = src.get("subject")
                    if acc is None or subj is None:
                        b.err(v, f"Expect an account and a subject for {k} import")
                        continue
                    subject = _subject(b, "subject", subj)
                    if subject is not None:
                        kind: Any = "stream" if k == "stream" else "service"
                        spec = ImportSpec(kind, b.string("account", acc), subject, where=v.where)
                elif k == "prefix":
                    prefix = b.string(k, v)
                elif k in ("to", "local_subject"):
                    to = _subject(b, k, v)
                else:
                    b.unknown(key, v, _IGNORED_IMPORT_KEYS)
            except _Skip:
                pass
        if spec is None:
            b.err(entry, "Expected a stream or service in import")
            continue
        if spec.kind == "stream" and prefix and to:
            b.err(entry, "Stream import can not have a 'prefix' and a 'to' property")
            continue
        if spec.kind == "service" and prefix:
            b.err(entry, "Service import can not have a 'prefix' property")
            continue
        if prefix:
            spec.to = prefix.rstrip(".") + "." + spec.subject
        elif to:
            if _wildcards(to) not in ([], _wildcards(spec.subject)):
                b.err(
                    entry,
                    f'import "to" subject "{to}" does not keep the wildcards of "{spec.subject}"',
                )
                continue
            spec.to = to
        out.append(spec)
    return out


def _wildcards(subject: str) -> list[str]:
    return [t for t in subject.split(".") if t in ("*", ">")]


def _check_imports(b: _Builder, top: dict[str, ConfValue]) -> None:  # top: lower-case keys
    """Every import names a defined account and an export that allows it (nats-server's
    messages)."""
    from node.subjects import subset

    cfg = b.cfg
    where = top.get("accounts")
    for spec in cfg.accounts.values():
        for imp in spec.imports:
            src = cfg.accounts.get(imp.account)
            if src is None:
                what = f'"{imp.account}" account not defined for {imp.kind} import'
                if where is not None:
                    b.err(where, what)
                else:
                    b.err_at(imp.where, what)
                continue
            ok = any(
                e.kind == imp.kind
                and subset(imp.subject.encode(), e.subject.encode())
                and (e.accounts is None or spec.name in e.accounts)
                for e in src.exports
            )
            if not ok and where is not None:
                b.err(
                    where,
                    f'Error adding {imp.kind} import "{imp.subject}": '
                    f"{imp.kind} import not authorized",
                )


#: account ``jetstream`` map keys (nats-server's aliases) -> JetStreamAccountLimits names
_JS_LIMIT_KEYS = {
    "max_mem": "max_memory",
    "max_memory": "max_memory",
    "mem": "max_memory",
    "memory": "max_memory",
    "max_file": "max_storage",
    "max_store": "max_storage",
    "max_disk": "max_storage",
    "store": "max_storage",
    "disk": "max_storage",
    "max_streams": "max_streams",
    "streams": "max_streams",
    "max_consumers": "max_consumers",
    "consumers": "max_consumers",
}
_JS_SIZES = frozenset({"max_memory", "max_storage"})
#: per-account JetStream keys nats-server reads and trijet does not enforce yet (refused)
_JS_UNSUPPORTED_KEYS = frozenset(
    {
        "max_bytes_required",
        "max_stream_bytes",
        "max_bytes",
        "mem_max_stream_bytes",
        "memory_max_stream_bytes",
        "disk_max_stream_bytes",
        "store_max_stream_bytes",
        "max_ack_pending",
    }
)


def _account_jetstream(b: _Builder, spec: AccountSpec, cv: ConfValue) -> bool:
    """``jetstream`` inside an account: enabled/disabled, a bool, or a map of limits
    (``spec.js_limits``)."""
    from node.conftree import _Skip

    v = cv.value
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        low = v.lower()
        if low in ("enabled", "enable"):
            return True
        if low in ("disabled", "disable"):
            return False
        b.err(cv, f"Expected 'enabled' or 'disabled' for string value, got '{v}'")
        return False
    if isinstance(v, dict):
        enabled = True
        for key, mv in v.items():
            k = key.lower()
            try:
                if k in ("enabled", "enable"):
                    enabled = b.boolean(k, mv)
                elif k in _JS_LIMIT_KEYS:
                    name = _JS_LIMIT_KEYS[k]
                    value = b.size(k, mv) if name in _JS_SIZES else b.integer(k, mv)
                    spec.js_limits[name] = value
                elif k in _JS_UNSUPPORTED_KEYS:
                    b.err(
                        mv,
                        f'per-account JetStream field "{key}" is not supported yet (account '
                        f'"{spec.name}"): trijet would not enforce it',
                    )
                else:  # nats-server knows no other (tiers come only from account JWTs)
                    b.err(mv, f'unknown field "{key}"')
            except _Skip:
                pass
        return enabled
    b.err(cv, f"Expected map, bool or string to define JetStream, got {_kind(v)}")
    return False


def check_accounts(b: _Builder, top: dict[str, ConfValue], account_users: list[UserSpec]) -> None:
    """The rules that span keys, once the whole file is read."""
    top = {k.lower(): v for k, v in top.items()}  # keys are case-insensitive
    cfg = b.cfg
    auth = cfg.auth
    if account_users:
        auth.users = list(auth.users) + account_users
        if auth.user or auth.token:
            where = top.get("accounts") or top.get("authorization")
            if where is not None:
                b.err(where, "Can not have a single user/pass or token and accounts with users")
    seen: set[str] = set()
    for u in auth.users:
        name = u.nkey or u.user or ""
        if name in seen and account_users:
            what = "nkey" if u.nkey else "user"
            b.err(
                top.get("accounts") or top.get("authorization") or next(iter(top.values())),
                f'Duplicate {what} "{name}" detected',
            )
        seen.add(name)
    _check_imports(b, top)
    sys_cv = top.get("system_account") or top.get("system")
    if sys_cv is not None:
        name = cfg.system_account
        if name != DEFAULT_SYSTEM_ACCOUNT and name not in cfg.accounts:
            b.err(sys_cv, "error resolving system account: account missing")
    nau = auth.no_auth_user
    if nau and not any(u.user == nau or u.nkey == nau for u in auth.users):
        b.err(
            top.get("no_auth_user") or next(iter(top.values())),
            f'no_auth_user: "{nau}" not present as user or nkey in authorization block '
            "or account configuration",
        )
    js_accounts = [a.name for a in cfg.accounts.values() if a.jetstream]
    if cfg.jetstream.enabled and not js_accounts and user_accounts(cfg):
        b.err(
            top["accounts"],
            "JetStream is enabled but no account enables it: trijet needs exactly one account "
            "with jetstream enabled when accounts are configured",
        )


def user_accounts(cfg: ServerConfig) -> list[str]:
    """Configured accounts other than the system account (nats-server's 'others')."""
    return [n for n in cfg.accounts if n != cfg.system_account]


def jetstream_account(cfg: ServerConfig) -> str | None:
    """The home account, the first JetStream runs in (None: JetStream is off)."""
    accs = jetstream_accounts(cfg)
    return accs[0] if accs else None


def jetstream_accounts(cfg: ServerConfig) -> list[str]:
    """The accounts JetStream runs in, in configuration order: ``$G`` when no account but
    the system account is configured (nats-server's global-account-only case), else every
    account that enables it (never the system account)."""
    if not cfg.jetstream.enabled:
        return []
    if not user_accounts(cfg):
        return [GLOBAL_ACCOUNT]
    return [a.name for a in cfg.accounts.values() if a.jetstream and a.name != cfg.system_account]


def _kind(v: Any) -> str:

    return describe(v)
