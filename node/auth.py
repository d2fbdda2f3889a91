"""Client authentication and per-user permissions.

Theory of operation: an ``Authenticator`` is built once from the auth config.
It says whether auth is required and whether INFO must carry a ``nonce`` (any
nkey user), and ``check(connect, nonce)`` returns the matched user (a
``UserSpec``-like record, or a synthetic one for token / single user) or
``None`` for an Authorization Violation.  Passwords and tokens are compared in
constant time; nkey users prove possession of their seed by signing the
nonce, verified with the ``nkeys`` package.

``Permissions`` compiles a user's publish/subscribe allow/deny lists.  Checks
are pattern matches of a (possibly wildcard) subject against the listed
patterns, with wildcard tokens in the subject compared literally — the same
rule nats-server's sublist applies — and cached per subject (bounded).  A
wildcard subscription that overlaps a subscribe ``deny`` entry is allowed, but
messages matching the deny entry are filtered at delivery.

Pure: imports neither trio nor socket.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import dataclass, field
from typing import Any

from node.subjects import has_wildcard, match, subset

PERM_CACHE_ENTRIES_MAX = 1024


@dataclass(frozen=True)
class AuthedUser:
    """Who a connection authenticated as (``None`` fields when anonymous)."""

    name: str | None = None
    nkey: str | None = None
    permissions: Any = None  # the config's Permissions, or None
    account: str = "$G"  # the account the connection is bound to


@dataclass
class _Compiled:
    allow: list[tuple[bytes, bytes | None]] | None
    deny: list[tuple[bytes, bytes | None]]
    cache: dict[bytes, bool] = field(default_factory=dict)


def _compile(perm: Any) -> _Compiled | None:
    if perm is None:
        return None
    allow_src = getattr(perm, "allow", None)
    deny_src = getattr(perm, "deny", None) or []

    def split(entries: list[str]) -> list[tuple[bytes, bytes | None]]:
        out: list[tuple[bytes, bytes | None]] = []
        for e in entries:
            parts = e.split()
            if not parts:
                continue
            out.append((parts[0].encode(), parts[1].encode() if len(parts) > 1 else None))
        return out

    allow = split(list(allow_src)) if allow_src else None
    return _Compiled(allow, split(list(deny_src)))


class Permissions:
    """A user's compiled permissions.

    Args:
        perms: the config ``Permissions`` (``publish``, ``subscribe``,
            ``allow_responses``), or None for "everything allowed".
    """

    def __init__(self, perms: Any) -> None:
        self._pub = _compile(getattr(perms, "publish", None)) if perms else None
        self._sub = _compile(getattr(perms, "subscribe", None)) if perms else None
        self.allow_responses = getattr(perms, "allow_responses", None) if perms else None
        if self.allow_responses is not None and self._pub is None:
            # nats-server: allow_responses alone implies "publish nothing else"
            self._pub = _Compiled([], [])
        self.sub_deny_on_delivery = bool(self._sub and self._sub.deny)

    @property
    def restricts_publish(self) -> bool:
        return self._pub is not None

    def pub_allowed(self, subject: bytes) -> bool:
        """True when the user may publish to ``subject``."""
        c = self._pub
        if c is None:
            return True
        hit = c.cache.get(subject)
        if hit is not None:
            return hit
        ok = True
        if c.allow is not None:
            ok = any(match(p, subject) for p, _ in c.allow)
        if ok and c.deny:
            ok = not any(match(p, subject) for p, _ in c.deny)
        if len(c.cache) >= PERM_CACHE_ENTRIES_MAX:
            c.cache.clear()
        c.cache[subject] = ok
        return ok

    def sub_allowed(self, subject: bytes, queue: bytes | None) -> bool:
        """True when the user may subscribe to ``subject`` (in ``queue``)."""
        c = self._sub
        if c is None:
            return True
        ok = True
        if c.allow is not None:
            ok = any(
                match(p, subject) and (q is None or (queue is not None and match(q, queue)))
                for p, q in c.allow
            )
        if ok and c.deny:
            ok = not any(
                match(p, subject) and (q is None or (queue is not None and match(q, queue)))
                for p, q in c.deny
            )
        return ok

    def deliver_allowed(self, subject: bytes) -> bool:
        """Delivery-time filter for wildcard subscriptions overlapping a deny."""
        c = self._sub
        if c is None or not c.deny:
            return True
        return not any(match(p, subject) for p, q in c.deny if q is None)

    def wildcard_needs_filter(self, subject: bytes) -> bool:
        """True when a wildcard subscription overlaps some deny entry."""
        c = self._sub
        if c is None or not c.deny or not has_wildcard(subject):
            return False
        return any(subset(p, subject) for p, q in c.deny if q is None)


class Authenticator:
    """Decides whether a CONNECT authenticates.

    Args:
        auth: the config's ``AuthConfig`` (``user``, ``password``, ``token``,
            ``users``, ``no_auth_user``).
    """

    def __init__(self, auth: Any) -> None:
        self._user: str | None = getattr(auth, "user", None)
        self._password: str | None = getattr(auth, "password", None)
        self._token: str | None = getattr(auth, "token", None)
        users = list(getattr(auth, "users", None) or [])
        self._by_name = {u.user: u for u in users if getattr(u, "user", None)}
        self._by_nkey = {u.nkey: u for u in users if getattr(u, "nkey", None)}
        self._no_auth_user: str | None = getattr(auth, "no_auth_user", None)
        self.required = bool(self._user or self._token or users)
        self.needs_nonce = bool(self._by_nkey)

    def check(self, connect: dict[str, Any], nonce: str | None) -> AuthedUser | None:
        """Authenticate a CONNECT.

        Args:
            connect: the decoded CONNECT object.
            nonce: the nonce sent in INFO (needed for nkey users).

        Returns:
            The authenticated user, or None (Authorization Violation).
        """
        if not self.required:
            return AuthedUser()
        nkey = connect.get("nkey")
        if isinstance(nkey, str) and nkey and self._by_nkey:
            spec = self._by_nkey.get(nkey)
            if spec is None or nonce is None:
                return None
            sig = connect.get("sig")
            if not isinstance(sig, str) or not _verify_nkey(nkey, nonce, sig):
                return None
            return AuthedUser(nkey=nkey, permissions=spec.permissions, account=_acc(spec))
        user = connect.get("user")
        password = connect.get("pass")
        token = connect.get("auth_token")
        if self._token is not None:
            if isinstance(token, str) and _eq(token, self._token):
                return AuthedUser()
            return None
        if self._user is not None:
            if _eq(user, self._user) and _eq(password, self._password):
                return AuthedUser(name=self._user)
            return None
        if isinstance(user, str) and user in self._by_name:
            spec = self._by_name[user]
            if _eq(password, spec.password):
                return AuthedUser(name=user, permissions=spec.permissions, account=_acc(spec))
            return None
        if user is None and token is None and self._no_auth_user in self._by_name:
            spec = self._by_name[self._no_auth_user]
            return AuthedUser(name=spec.user, permissions=spec.permissions, account=_acc(spec))
        if user is None and token is None and self._no_auth_user in self._by_nkey:
            spec = self._by_nkey[self._no_auth_user]
            return AuthedUser(nkey=spec.nkey, permissions=spec.permissions, account=_acc(spec))
        return None


def _acc(spec: Any) -> str:
    return str(getattr(spec, "account", None) or "$G")


def _eq(a: Any, b: Any) -> bool:
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    return hmac.compare_digest(a.encode(), b.encode())


def _verify_nkey(public_key: str, nonce: str, sig: str) -> bool:
    raw: bytes | None = None
    padded = sig + "=" * (-len(sig) % 4)
    for altchars in (b"-_", b"+/"):
        try:
            raw = base64.b64decode(padded, altchars=altchars, validate=True)
            break
        except (binascii.Error, ValueError):
            continue
    if raw is None:
        return False
    key = _user_public_key_bytes(public_key)
    if key is None:
        return False
    import nacl.exceptions
    import nacl.signing

    try:
        nacl.signing.VerifyKey(key).verify(nonce.encode(), raw)
    except (nacl.exceptions.BadSignatureError, ValueError, TypeError):
        return False
    return True


def _user_public_key_bytes(public_key: str) -> bytes | None:
    """Decode a user nkey (``U...``) to its 32 raw ed25519 bytes, checking the CRC."""
    import nkeys

    try:
        raw = base64.b32decode(public_key.encode() + b"=" * (-len(public_key) % 8))
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 35 or raw[0] != nkeys.PREFIX_BYTE_USER:
        return None
    if nkeys.crc16(bytearray(raw[:-2])) != int.from_bytes(raw[-2:], "little"):
        return None
    return raw[1:33]
