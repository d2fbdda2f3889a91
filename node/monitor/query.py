"""Query-string decoding with nats-server's rules and error texts.

Theory of operation: Go's ``r.URL.Query().Get(name)`` takes the first value
of a parameter, and an empty value means "not given".  Booleans, ints and
uint64s are parsed with Go's ``strconv`` rules; a bad value is an HTTP 400
whose body is nats-server's text, e.g.
``Error decoding int for 'limit': strconv.Atoi: parsing "abc": invalid syntax``.
Errors are raised as :class:`MonitorError` carrying the status and body, so
the pure endpoint functions and the HTTP shell share one error path.
"""

from __future__ import annotations

import enum
import json
import urllib.parse
from collections.abc import Mapping

_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1


class MonitorError(Exception):
    """A monitoring request that cannot be answered: HTTP ``status`` with plain-text ``text``."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


class ConnState(enum.Enum):
    """``/connz?state=``: which connections to list."""

    OPEN = "open"
    CLOSED = "closed"
    ANY = "any"


def _go_quote(s: str) -> str:
    """Approximately Go's ``strconv.Quote`` (JSON string escaping, UTF-8 kept)."""
    return json.dumps(s, ensure_ascii=False)


def _digits(s: str) -> bool:
    return s.isascii() and s.isdigit()


class Query:
    """Decoded query parameters (first value of each, as Go's ``Query().Get``).

    Args:
        params: a mapping of name to value (tests pass plain dicts).
    """

    def __init__(self, params: Mapping[str, str] | None = None) -> None:
        self._p = dict(params or {})

    @classmethod
    def parse(cls, query_string: str) -> Query:
        """Parse a raw query string (``a=1&b=2``); the first value of a name wins."""
        out: dict[str, str] = {}
        for k, v in urllib.parse.parse_qsl(query_string, keep_blank_values=True):
            out.setdefault(k, v)
        return cls(out)

    def get(self, name: str) -> str:
        """The raw value, ``""`` when absent."""
        return self._p.get(name, "")

    def bool(self, name: str) -> bool:
        """Go ``strconv.ParseBool``; absent or empty is False."""
        s = self.get(name)
        if not s:
            return False
        if s in _GO_TRUE:
            return True
        if s in _GO_FALSE:
            return False
        raise MonitorError(
            400,
            f"Error decoding boolean for '{name}': strconv.ParseBool: parsing {_go_quote(s)}: invalid syntax",
        )

    def int(self, name: str) -> int:
        """Go ``strconv.Atoi``; absent or empty is 0."""
        s = self.get(name)
        if not s:
            return 0
        body = s[1:] if s[0] in "+-" else s
        if not _digits(body):
            why = "invalid syntax"
        elif len(body.lstrip("0")) > 19 or not (-_INT64_MAX - 1 <= int(s) <= _INT64_MAX):
            why = "value out of range"
        else:
            return int(s)
        raise MonitorError(
            400,
            f"Error decoding int for '{name}': strconv.Atoi: parsing {_go_quote(s)}: {why}",
        )

    def uint64(self, name: str) -> int:
        """Go ``strconv.ParseUint(s, 10, 64)``; absent or empty is 0."""
        s = self.get(name)
        if not s:
            return 0
        if not _digits(s):
            why = "invalid syntax"
        elif len(s.lstrip("0")) > 20 or int(s) > _UINT64_MAX:
            why = "value out of range"
        else:
            return int(s)
        raise MonitorError(
            400,
            f"Error decoding uint64 for '{name}': strconv.ParseUint: parsing {_go_quote(s)}: {why}",
        )

    def state(self) -> ConnState:
        """``state=open|closed|any|all`` (case-insensitive); default open."""
        s = self.get("state")
        if not s:
            return ConnState.OPEN
        low = s.lower()
        if low == "open":
            return ConnState.OPEN
        if low == "closed":
            return ConnState.CLOSED
        if low in ("any", "all"):
            return ConnState.ANY
        raise MonitorError(400, f"Error decoding state for {s}")

    def subs(self) -> tuple[bool, bool]:
        """``subs=<bool>|detail`` → (subscriptions list, detailed list)."""
        if self.get("subs").lower() == "detail":
            return False, True
        return self.bool("subs"), False
