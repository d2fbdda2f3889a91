"""Config file: the ``leafnodes`` block.

Theory of operation: :mod:`node.conftree`'s builder hands the ``leafnodes`` value here
(:func:`read_leafnodes`).  A listener (``listen``/``port``/``host``) accepts leaf
connections, authenticated by ``authorization { user, password, account }`` (the account
the leaf is bound to); each ``remotes`` entry is a hub this server solicits
(``url``/``urls`` with ``user:password@``, the local ``account`` bound to it); ``reconnect``
is the delay before a dropped remote is dialled again.  Keys nats-server knows that change
nothing trijet delivers (advertising, ...) are accepted with a warning.  ``compression`` (on
the block or a remote): ``off``/``accept`` are what trijet does (no s2 codec: a link always
negotiates to uncompressed); an s2 mode is refused.  ``tls {}``
(the listener's: a server certificate, ``verify`` for the leaf's; a remote's: ``ca_file``,
an optional client certificate) makes the link TLS as nats-server's (INFO in the clear, then
the handshake).  ``tls_handshake_first``, JWT ``credentials``, ``deny_exports``/``deny_imports`` and hub remotes are refused with an error
that names them: dropping them would leave a link unencrypted, unauthenticated or unfiltered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.conffile import ConfValue
from node.configtypes import LeafConfig, LeafRemote, LeafUser, TLSConfig

if TYPE_CHECKING:
    from node.conftree import _Builder

_IGNORED_LEAF = frozenset(
    """advertise no_advertise min_version write_deadline isolate_leafnode_interest""".split()
)
_IGNORED_REMOTE = frozenset(
    """first_info_timeout no_randomize ws_compression ws_no_masking name""".split()
)
#: ``compression`` modes trijet honours: it has no s2 codec, so a link is never compressed;
#: ``accept`` (compress only if the peer asks) negotiates to off with trijet's answer
_COMPRESSION_OK = frozenset(
    {"off", "disabled", "false", "not supported", "not_supported", "accept"}
)
#: keys whose meaning trijet does not implement and must not drop silently (a link that
#: should be encrypted, authenticated by JWT or filtered would not be)
_REFUSED = {
    "tls_handshake_first": "leafnode TLS",
    "tls_handshake_first_fallback": "leafnode TLS",
    "credentials": "leafnode JWT credentials (operator mode)",
    "creds": "leafnode JWT credentials (operator mode)",
    "deny_exports": "leafnode deny_exports/deny_imports",
    "deny_imports": "leafnode deny_exports/deny_imports",
    "hub": "a hub remote (local_is_hub)",
    "local_is_hub": "a hub remote (local_is_hub)",
    "disabled": "disabled remotes",
}


def _refuse(b: _Builder, key: str, cv: ConfValue) -> None:
    b.err(cv, f'{_REFUSED[key]} is not supported by trijet yet (field "{key}")')


def read_leafnodes(b: _Builder, cv: ConfValue, skip: type[Exception]) -> None:
    """Read the ``leafnodes`` block into ``b.cfg.leafnodes``."""
    block = b.block("leafnodes", cv)
    lf = b.cfg.leafnodes or LeafConfig()
    for key, v in block.items():
        k = key.lower()
        try:
            if k == "listen":
                host, port = b.listen(k, v)
                lf.host = host or lf.host
                lf.port = port
            elif k == "port":
                lf.port = b.integer(k, v)
            elif k in ("host", "net"):
                lf.host = b.string(k, v)
            elif k == "authorization":
                _authorization(b, lf, v)
            elif k == "remotes":
                if not isinstance(v.value, list):
                    b.err(v, f"Expected remotes field to be an array, got {type(v.value).__name__}")
                    continue
                lf.remotes = [_remote(b, item, skip) for item in v.value]
            elif k == "tls":
                lf.tls = b.tls(v)
                if lf.tls is not None and lf.tls.handshake_first:
                    _refuse(b, "tls_handshake_first", v)
            elif k == "reconnect" or k == "reconnect_delay":
                lf.reconnect_s = b.duration(k, v)
            elif k == "compression":
                _compression(b, v)
            elif k in _REFUSED:
                _refuse(b, k, v)
            else:
                b.unknown(key, v, _IGNORED_LEAF)
        except skip:
            pass
    b.cfg.leafnodes = lf


def _compression(b: _Builder, cv: ConfValue) -> None:
    check_compression(b, cv, "leafnode")


def check_compression(b: _Builder, cv: ConfValue, what: str) -> None:
    """``compression`` (of ``what``: ``leafnode`` or ``cluster``): a boolean, a mode, or
    ``{ mode, rtt_thresholds }`` (nats-server's forms).  Off (and ``accept``: compress
    only when the peer asks, which trijet's INFO never does) is what every trijet link
    does; an s2 mode (``on``, ``s2_auto``, ``s2_fast``, ...) cannot be honoured without an
    s2 codec: refused rather than silently sending uncompressed."""
    v = cv.value
    if isinstance(v, dict):
        mode_cv = next((x for k, x in v.items() if k.lower() == "mode"), None)
        v = mode_cv.value if mode_cv is not None else "off"
    if isinstance(v, bool):
        mode = "on" if v else "off"
    elif isinstance(v, str):
        mode = v.strip().lower()
    else:
        b.err(cv, f"{what} compression: expected a boolean, a mode or a block, got {v!r}")
        return
    if mode not in _COMPRESSION_OK:
        b.err(
            cv,
            f'{what} compression "{mode}" is not supported by trijet (it has no s2 codec; '
            'links are uncompressed): use "off" or "accept"',
        )


def _authorization(b: _Builder, lf: LeafConfig, cv: ConfValue) -> None:
    for key, v in b.block("authorization", cv).items():
        k = key.lower()
        if k in ("user", "username"):
            lf.user = b.string(k, v)
        elif k in ("pass", "password"):
            lf.password = b.string(k, v)
        elif k == "account":
            lf.account = b.string(k, v)
        elif k == "timeout":
            lf.auth_timeout_s = b.timeout(k, v)
        elif k == "users":
            lf.users = _users(b, v)
        elif k in ("token", "nkey"):
            # ignoring them would accept any leaf: refused
            b.err(v, f'leafnode authorization "{k}" is not supported by trijet yet')
        else:
            b.unknown(key, v, frozenset())


def _users(b: _Builder, cv: ConfValue) -> list[LeafUser]:
    if not isinstance(cv.value, list):
        b.err(cv, f"leafnode users: expected an array, got {type(cv.value).__name__}")
        return []
    out = []
    for item in cv.value:
        fields: dict[str, str] = {}
        for key, v in b.block("user", item).items():
            k = key.lower()
            if k in ("user", "username"):
                fields["user"] = b.string(k, v)
            elif k in ("pass", "password"):
                fields["password"] = b.string(k, v)
            elif k == "account":
                fields["account"] = b.string(k, v)
            else:
                # permissions and nkeys would be dropped: refused
                b.err(v, f'leafnode user field "{key}" is not supported by trijet yet')
        if "user" not in fields or "password" not in fields:
            b.err(item, "leafnode user needs user and password")
            continue
        out.append(LeafUser(fields["user"], fields["password"], fields.get("account")))
    return out


def _remote(b: _Builder, cv: ConfValue, skip: type[Exception]) -> LeafRemote:
    r = LeafRemote()
    for key, v in b.block("remote", cv).items():
        k = key.lower()
        try:
            if k in ("url", "urls"):
                r.urls = b.strings(k, v)
            elif k in ("account", "local"):
                r.account = b.string(k, v)
            elif k == "tls":
                r.tls = _remote_tls(b, v)
            elif k == "compression":
                _compression(b, v)
            elif k in _REFUSED:
                _refuse(b, k, v)
            else:
                b.unknown(key, v, _IGNORED_REMOTE)
        except skip:
            pass
    if not r.urls:
        b.err(cv, "leafnode remote requires at least one url")
    return r


def _remote_tls(b: _Builder, cv: ConfValue) -> TLSConfig:
    """A remote's ``tls {}``: the CA that signs the hub's certificate, and an optional
    client certificate (``cert_file``/``key_file``)."""
    t = TLSConfig(cert_file="", key_file="")
    for key, v in b.block("tls", cv).items():
        k = key.lower()
        if k in ("cert_file", "key_file", "ca_file"):
            setattr(t, k, b.string(k, v))
        elif k == "timeout":
            t.timeout_s = b.timeout(k, v)
        elif k == "handshake_first":
            _refuse(b, "tls_handshake_first", v)
        else:
            b.unknown(
                key, v, frozenset({"verify", "insecure", "cipher_suites", "curve_preferences"})
            )
    if bool(t.cert_file) != bool(t.key_file):
        b.err(cv, "leafnode remote tls: 'cert_file' and 'key_file' go together")
    return t


def check_leafnodes(b: _Builder) -> None:
    """Once the whole file is read: the accounts the block names exist."""
    lf = b.cfg.leafnodes
    if lf is None:
        return
    known = {"$G", b.cfg.system_account, *b.cfg.accounts}
    named = [("authorization", lf.account)] + [("remote", r.account) for r in lf.remotes]
    named += [("user", u.account) for u in lf.users]
    for where, acc in named:
        if acc is not None and acc not in known:
            b.errors.append(f'leafnodes {where}: account "{acc}" not found')
