"""JSON decoding for untrusted bytes: no recursion, Go's depth limit.

Theory of operation: every JSON document a client, a route, an API request,
an ack or an advisory input sends goes through ``loads``.  Python's
``json.loads`` recurses once per nesting level (C recursion counted against
``sys.getrecursionlimit()``), so a 2 KB document nested 1,000 deep raises
``RecursionError`` — not a ``ValueError`` — out of whatever decoded it.
nats-server decodes with Go's ``encoding/json``, which accepts nesting up to
``DEPTH_MAX`` (10,000) levels and fails beyond with ``exceeded max depth``.

``loads`` tries the C decoder first (it answers every document it can,
at C speed, and raises ``RecursionError`` cleanly on one too deep for it)
and then an iterative parser with an explicit stack.  The iterative parser accepts what
``json.loads`` accepts (same scalars through the same helpers) and raises
``json.JSONDecodeError`` for the same inputs; beyond ``depth_max`` open
containers it raises ``JSONDepthError``, a ``ValueError`` whose text is Go's
(``exceeded max depth at offset N``; N counts characters of the decoded text,
callers that need Go's byte offsets compute them on bytes as
``node.jsapi.godecode`` does).

Values decoded from deep documents are plain nested lists and dicts; code
that walks a decoded value must do so without recursion or bound the depth
it walks (``depth_of`` measures one iteratively).

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

DEPTH_MAX = 10_000
"""Go ``encoding/json``'s nesting limit (``maxNestingDepth``)."""

_FAST_DEPTH_MAX = 1_000
"""The C decoder is tried first when the limit is at least this deep: it
raises ``RecursionError`` (cleanly) before ``sys.getrecursionlimit()``
levels, far below ``DEPTH_MAX``, and then the iterative parser takes over."""

_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_WS_RE = re.compile(r"[ \t\n\r]*")
_NUMBER_RE = re.compile(r"(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?")
_CONSTANTS: dict[str, Any] = {
    "null": None,
    "true": True,
    "false": False,
}
_FLOAT_CONSTANTS = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}

_INT_DIGITS_MAX = 4_000
"""Below Python's ``int()`` digit limit (4,300 by default): longer integers
decode as floats (``inf``), as Go decodes a number into ``float64`` — a
value no int64 field accepts, which callers' type checks then refuse, while
an unknown field holding it is ignored as nats-server ignores it."""


def _parse_int(text: str) -> int | float:
    return int(text) if len(text) <= _INT_DIGITS_MAX else float(text)


PairsHook = Callable[[list[tuple[str, Any]]], Any]


class JSONDepthError(ValueError):
    """Nesting beyond the limit; ``str()`` is Go's text."""

    def __init__(self, offset: int) -> None:
        super().__init__(f"exceeded max depth at offset {offset}")
        self.offset = offset


def loads(
    data: bytes | str,
    *,
    object_pairs_hook: PairsHook | None = None,
    parse_int: Callable[[str], Any] | None = None,
    parse_float: Callable[[str], Any] | None = None,
    parse_constant: Callable[[str], Any] | None = None,
    depth_max: int = DEPTH_MAX,
) -> Any:
    """``json.loads`` without recursion and with a nesting limit.

    Args:
        data: the document; bytes are decoded as UTF-8 with invalid bytes
            replaced (U+FFFD), as Go's decoder reads them inside strings.
        object_pairs_hook, parse_int, parse_float, parse_constant: as for
            ``json.loads``.
        depth_max: open containers allowed at once.

    Returns:
        The decoded value.

    Raises:
        JSONDepthError: nesting deeper than ``depth_max``.
        ValueError: any other invalid document (``json.JSONDecodeError``).
    """
    text = data.decode("utf-8", "replace") if isinstance(data, bytes | bytearray) else data
    if parse_int is None:
        parse_int = _parse_int
    if depth_max >= _FAST_DEPTH_MAX:
        try:
            return json.loads(
                text,
                object_pairs_hook=object_pairs_hook,
                parse_int=parse_int,
                parse_float=parse_float,
                parse_constant=parse_constant,
            )
        except RecursionError:
            pass  # deeper than the C decoder goes: the iterative parser decides
    parser = _Parser(text, object_pairs_hook, parse_int, parse_float, depth_max)
    if parse_constant is not None:
        parser.parse_constant = parse_constant
    return parser.parse()


def depth_of(value: Any, limit: int = DEPTH_MAX) -> int:
    """Nesting depth of a decoded value (0 for a scalar), counted without
    recursion; stops counting at ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children: Any = v.values()
        elif isinstance(v, list | tuple):
            children = v
        else:
            continue
        d += 1
        if d > deepest:
            deepest = d
            if deepest >= limit:
                return deepest
        stack.extend((c, d) for c in children)
    return deepest


class _Parser:
    """Iterative recursive-descent: ``stack`` holds the open containers."""

    def __init__(
        self,
        s: str,
        hook: PairsHook | None,
        parse_int: Callable[[str], Any] | None,
        parse_float: Callable[[str], Any] | None,
        depth_max: int,
    ) -> None:
        self.s = s
        self.hook = hook
        self.parse_int: Callable[[str], Any] = parse_int or int
        self.parse_float: Callable[[str], Any] = parse_float or float
        self.depth_max = depth_max
        self.parse_constant: Callable[[str], Any] = float

    def _ws(self, i: int) -> int:
        m = _WS_RE.match(self.s, i)
        return m.end() if m is not None else i

    def _fail(self, msg: str, i: int) -> json.JSONDecodeError:
        return json.JSONDecodeError(msg, self.s, i)

    def _key(self, i: int) -> tuple[str, int]:
        """A key and its colon at ``i``; returns (key, index of the value)."""
        s = self.s
        if s[i : i + 1] != '"':
            raise self._fail("Expecting property name enclosed in double quotes", i)
        key, i = _scanstring(s, i + 1)
        i = self._ws(i)
        if s[i : i + 1] != ":":
            raise self._fail("Expecting ':' delimiter", i)
        return key, self._ws(i + 1)

    def _scalar(self, i: int) -> tuple[Any, int]:
        s = self.s
        c = s[i : i + 1]
        if c == '"':
            return _scanstring(s, i + 1)
        m = _NUMBER_RE.match(s, i)
        if m is not None:
            integer, frac, exp = m.groups()
            if frac or exp:
                return self.parse_float(integer + (frac or "") + (exp or "")), m.end()
            return self.parse_int(integer), m.end()
        for lit, val in _CONSTANTS.items():
            if s.startswith(lit, i):
                return val, i + len(lit)
        for lit in _FLOAT_CONSTANTS:
            if s.startswith(lit, i):
                return self.parse_constant(lit), i + len(lit)
        raise self._fail("Expecting value", i)

    def _obj(self, pairs: list[tuple[str, Any]]) -> Any:
        return self.hook(pairs) if self.hook is not None else dict(pairs)

    def parse(self) -> Any:
        s = self.s
        n = len(s)
        # open containers: [is_object, items, pending key]
        stack: list[list[Any]] = []
        i = self._ws(0)
        while True:
            # a value starts at i
            c = s[i : i + 1]
            if c == "{" or c == "[":
                if len(stack) >= self.depth_max:
                    raise JSONDepthError(i + 1)
                j = self._ws(i + 1)
                if c == "{":
                    if s[j : j + 1] == "}":
                        value: Any = self._obj([])
                        i = j + 1
                    else:
                        key, i = self._key(j)
                        stack.append([True, [], key])
                        continue
                elif s[j : j + 1] == "]":
                    value = []
                    i = j + 1
                else:
                    stack.append([False, [], None])
                    i = j
                    continue
            else:
                value, i = self._scalar(i)
            # a value ended at i: attach it, closing containers as they end
            while True:
                i = self._ws(i)
                if not stack:
                    if i != n:
                        raise self._fail("Extra data", i)
                    return value
                top = stack[-1]
                c = s[i : i + 1]
                if top[0]:
                    top[1].append((top[2], value))
                    if c == ",":
                        top[2], i = self._key(self._ws(i + 1))
                        break
                    if c != "}":
                        raise self._fail("Expecting ',' delimiter", i)
                    stack.pop()
                    value = self._obj(top[1])
                else:
                    top[1].append(value)
                    if c == ",":
                        i = self._ws(i + 1)
                        break
                    if c != "]":
                        raise self._fail("Expecting ',' delimiter", i)
                    stack.pop()
                    value = top[1]
                i += 1
