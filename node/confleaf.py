"""Config file: the ``leafnodes`` block.

Theory of operation: :mod:`node.conftree`'s builder hands the ``leafnodes`` value here
(:func:`read_leafnodes`).  A listener (``listen``/``port``/``host``) accepts leaf
connections, authenticated by ``authorization { user, password, account }`` (the account
the leaf is bound to); each ``remotes`` entry is a hub this server solicits
(``url``/``urls``, the local ``account`` bound to it, ``credentials``); ``reconnect`` is the
delay before a dropped remote is dialled again.  Keys nats-server knows that change nothing
trijet does (TLS, compression, websocket remotes) are accepted with a warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.conffile import ConfValue
from node.configtypes import LeafConfig, LeafRemote

if TYPE_CHECKING:
    from node.conftree import _Builder

_IGNORED_LEAF = frozenset(
    """tls advertise no_advertise compression min_version write_deadline
    tls_handshake_first tls_handshake_first_fallback isolate_leafnode_interest""".split()
)
_IGNORED_REMOTE = frozenset(
    """tls compression hub first_info_timeout no_randomize ws_compression
    ws_no_masking disabled name local_is_hub""".split()
)


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
            elif k == "reconnect" or k == "reconnect_delay":
                lf.reconnect_s = b.duration(k, v)
            else:
                b.unknown(key, v, _IGNORED_LEAF)
        except skip:
            pass
    b.cfg.leafnodes = lf


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
        else:
            b.unknown(key, v, frozenset({"users", "token", "nkey"}))


def _remote(b: _Builder, cv: ConfValue, skip: type[Exception]) -> LeafRemote:
    r = LeafRemote()
    for key, v in b.block("remote", cv).items():
        k = key.lower()
        try:
            if k in ("url", "urls"):
                r.urls = b.strings(k, v)
            elif k in ("account", "local"):
                r.account = b.string(k, v)
            elif k in ("credentials", "creds"):
                r.credentials = b.string(k, v)
            elif k == "deny_exports":
                r.deny_exports = b.strings(k, v)
            elif k == "deny_imports":
                r.deny_imports = b.strings(k, v)
            else:
                b.unknown(key, v, _IGNORED_REMOTE)
        except skip:
            pass
    if not r.urls:
        b.err(cv, "leafnode remote requires at least one url")
    return r
