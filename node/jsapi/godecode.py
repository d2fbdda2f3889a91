"""A Go ``encoding/json`` imitation for JetStream API requests.

Theory of operation: nats-server decodes API requests with ``json.Decoder`` and
``DisallowUnknownFields`` into Go structs, and a failure reaches the client as
``invalid JSON: <Go error text>`` (10025).  ``scan_go`` is a JSON scanner that
reports syntax errors with Go's wording and offsets; ``decode_struct`` walks a
``Schema`` (every field's Go type) over the scanned value and reports the first
type problem in document order the way Go does (unknown field, cannot unmarshal
X into Go struct field P of type T).  Keys match exactly first, then ASCII
case-insensitively, as Go does.  Pure: no I/O.

Go decoding
-----------
nats-server decodes API requests with ``json.NewDecoder`` +
``DisallowUnknownFields`` into a Go struct; a failure becomes
``invalid JSON: <Go error text>`` (10025).  Clients see that text, so we
reproduce the common cases:

* syntax (``scan_go``): ``unexpected EOF`` for truncated input, else
  ``invalid character 'x' <context> at offset N`` (N = index of the bad byte
  + 1), with Go's contexts (``looking for beginning of value``, ``after object
  key``, …).  NaN/Infinity and other Python-only extensions are rejected.
* types (``decode_struct``): a ``Schema`` names every field's Go type; the
  first problem in document order wins: ``json: unknown field "x"``,
  ``json: cannot unmarshal <string|number|number 1.5|bool|array|object> into
  Go struct field StreamConfigRequest.<path> of type <go type>`` (Go 1.25
  paths: ``sources.0.name``, ``metadata.key``; an array element of a basic
  type reads ``into StreamConfigRequest.subjects.0``), custom enum errors
  ``can not unmarshal "\\"x\\""``.
* keys match exactly first, then ASCII case-insensitively (Go does); a
  repeated key overwrites; ``null`` leaves a field at its zero value except for
  enums, whose Go ``UnmarshalJSON`` sees ``null`` and rejects it.

Known differences: the raw text quoted in enum errors is re-encoded
compactly (Go quotes the bytes as sent), and invalid UTF-8 is replaced as
Python's ``errors="replace"`` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from node.protocol.boundedjson import DEPTH_MAX
from node.protocol.boundedjson import loads as bounded_loads


class GoJSONError(Exception):
    """A Go ``encoding/json`` error; ``str()`` is Go's message."""


class Num(str):
    """A JSON number kept as its literal text."""

    __slots__ = ()


_WS = b" \t\r\n"


def _quote_char(c: int) -> str:
    ch = chr(c)
    if ch == "'":
        return "'\\''"
    if ch == '"':
        return "'\"'"
    q = go_quote(ch)
    return "'" + q[1:-1] + "'"


# the escapes Go's strconv.Quote writes as a backslash and a letter
_GO_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\t": "\\t",
    "\r": "\\r",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\v": "\\v",
}


def go_quote(s: str) -> str:
    """Go ``strconv.Quote``: escapes quotes, backslashes and non-printables."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        esc = _GO_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


class _Scanner:
    def __init__(self, data: bytes) -> None:
        self.d = data
        self.i = 0

    def err(self, ctx: str) -> GoJSONError:
        if self.i >= len(self.d):
            return GoJSONError("unexpected EOF")
        return GoJSONError(
            f"invalid character {_quote_char(self.d[self.i])} {ctx} at offset {self.i + 1}"
        )

    def ws(self) -> None:
        while self.i < len(self.d) and self.d[self.i] in _WS:
            self.i += 1

    def peek(self) -> int:
        return self.d[self.i] if self.i < len(self.d) else -1

    def value(self) -> None:
        """Scan one value; containers are tracked on an explicit stack (no
        recursion), and opening one past ``DEPTH_MAX`` is Go's ``exceeded
        max depth`` error at the offset after that bracket."""
        # open containers: True for an object, False for an array
        stack: list[bool] = []
        while True:
            self.ws()
            c = self.peek()
            if c == ord("{") or c == ord("["):
                if len(stack) >= DEPTH_MAX:
                    raise GoJSONError(f"exceeded max depth at offset {self.i + 1}")
                self.i += 1
                self.ws()
                if c == ord("{"):
                    if self.peek() != ord("}"):
                        stack.append(True)
                        self.key()
                        continue
                elif self.peek() != ord("]"):
                    stack.append(False)
                    continue
                self.i += 1
            else:
                self.scalar(c)
            # a value ended: close containers that end here
            while stack:
                self.ws()
                c = self.peek()
                if stack[-1]:
                    if c == ord(","):
                        self.i += 1
                        self.ws()
                        self.key()
                        break
                    if c != ord("}"):
                        raise self.err("after object key:value pair")
                else:
                    if c == ord(","):
                        self.i += 1
                        break
                    if c != ord("]"):
                        raise self.err("after array element")
                self.i += 1
                stack.pop()
            else:
                return

    def key(self) -> None:
        """An object key and its colon."""
        if self.peek() != ord('"'):
            raise self.err("looking for beginning of object key string")
        self.string()
        self.ws()
        if self.peek() != ord(":"):
            raise self.err("after object key")
        self.i += 1

    def scalar(self, c: int) -> None:
        if c == ord('"'):
            self.string()
            return
        if c == ord("-") or ord("0") <= c <= ord("9"):
            self.number()
            return
        for lit in (b"true", b"false", b"null"):
            if c == lit[0]:
                self.i += 1
                for want in lit[1:]:
                    if self.peek() != want:
                        raise self.err(f"in literal {lit.decode()} (expecting {_quote_char(want)})")
                    self.i += 1
                return
        raise self.err("looking for beginning of value")

    def string(self) -> None:
        self.i += 1
        while True:
            c = self.peek()
            if c == -1:
                raise self.err("")
            if c == ord('"'):
                self.i += 1
                return
            if c < 0x20:
                raise self.err("in string literal")
            if c == ord("\\"):
                self.i += 1
                e = self.peek()
                if e == ord("u"):
                    self.i += 1
                    for _ in range(4):
                        h = self.peek()
                        if h == -1 or chr(h) not in "0123456789abcdefABCDEF":
                            raise self.err("in \\u hexadecimal character escape")
                        self.i += 1
                    continue
                if e == -1 or chr(e) not in '"\\/bfnrt':
                    raise self.err("in string escape code")
            self.i += 1

    def digits(self) -> int:
        n = 0
        while ord("0") <= self.peek() <= ord("9"):
            self.i += 1
            n += 1
        return n

    def number(self) -> None:
        if self.peek() == ord("-"):
            self.i += 1
            if not ord("0") <= self.peek() <= ord("9"):
                raise self.err("in numeric literal")
        if self.peek() == ord("0"):
            self.i += 1
        else:
            self.digits()
        if self.peek() == ord("."):
            self.i += 1
            if not self.digits():
                raise self.err("after decimal point in numeric literal")
        if self.peek() in (ord("e"), ord("E")):
            self.i += 1
            if self.peek() in (ord("+"), ord("-")):
                self.i += 1
            if not self.digits():
                raise self.err("in exponent of numeric literal")


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def first_value_end(data: bytes) -> int | None:
    """Where the first JSON value of ``data`` ends (after leading blanks), or
    None when it is not a complete valid value; no recursion."""
    sc = _Scanner(data)
    sc.ws()
    try:
        sc.value()
    except GoJSONError:
        return None
    return sc.i


def scan_go(data: bytes) -> list[Any]:
    """Split a Go ``json.Decoder`` stream into its values, checking syntax Go's way.

    Returns:
        The decoded top-level values (objects as lists of ``(key, value)``
        pairs, numbers as ``Num``); empty input gives ``[]``.

    Raises:
        GoJSONError: with Go's message (``unexpected EOF``, ``invalid
            character … at offset N``).
    """
    # the common case at C speed: exactly one valid value Go would accept
    # too (NaN/Infinity refused); anything else takes the scanner, which
    # gives Go's error texts and splits a stream of several values
    try:
        return [
            bounded_loads(
                data,
                object_pairs_hook=_Obj,
                parse_int=Num,
                parse_float=Num,
                parse_constant=_no_constants,
            )
        ]
    except ValueError:
        pass
    sc = _Scanner(data)
    values: list[Any] = []
    while True:
        sc.ws()
        if sc.i >= len(data):
            return values
        start = sc.i
        sc.value()
        text = data[start : sc.i].decode("utf-8", errors="replace")
        values.append(bounded_loads(text, object_pairs_hook=_Obj, parse_int=Num, parse_float=Num))


# --------------------------------------------------------------------------- typed decoding


Decoder = Callable[[Any, "_Ctx"], Any]


@dataclass
class _Ctx:
    root: str
    path: list[str] = field(default_factory=list)
    first: GoJSONError | None = None

    def fail(self, err: GoJSONError) -> None:
        if self.first is None:
            self.first = err

    def type_error(self, value: Any, gotype: str, literal: bool = False) -> None:
        kind = _kind(value)
        if literal and isinstance(value, Num):
            kind = f"number {value}"
        where = ".".join([self.root, *self.path])
        if self.path and self.path[-1].isdigit():
            msg = f"json: cannot unmarshal {kind} into {where} of type {gotype}"
        elif self.path:
            msg = f"json: cannot unmarshal {kind} into Go struct field {where} of type {gotype}"
        else:
            msg = f"json: cannot unmarshal {kind} into Go value of type {gotype}"
        self.fail(GoJSONError(msg))


def _kind(v: Any) -> str:
    if isinstance(v, Num):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, _Obj):
        return "object"
    return "array"


class _Obj(list[tuple[str, Any]]):
    """Marker: a decoded JSON object (pairs)."""


def _is_obj(v: Any) -> bool:
    return isinstance(v, _Obj)


def _raw(v: Any) -> str:
    """Compact JSON text of a decoded value, built without recursion (values
    may nest ``DEPTH_MAX`` deep)."""
    out: list[str] = []
    # work items: a value to write, or a literal string to emit
    stack: list[tuple[bool, Any]] = [(True, v)]
    while stack:
        is_value, item = stack.pop()
        if not is_value:
            out.append(item)
        elif item is None:
            out.append("null")
        elif isinstance(item, Num):
            out.append(str(item))
        elif isinstance(item, str):
            out.append(json.dumps(item, ensure_ascii=False))
        elif isinstance(item, bool):
            out.append("true" if item else "false")
        else:
            obj = _is_obj(item)
            stack.append((False, "}" if obj else "]"))
            for k in range(len(item) - 1, -1, -1):
                if obj:
                    key, x = item[k]
                    stack.append((True, x))
                    stack.append(
                        (False, ("," if k else "") + json.dumps(key, ensure_ascii=False) + ":")
                    )
                else:
                    stack.append((True, item[k]))
                    if k:
                        stack.append((False, ","))
            out.append("{" if obj else "[")
    return "".join(out)


@dataclass(frozen=True)
class Schema:
    """A Go struct: JSON name -> decoder; ``go_name`` for messages."""

    go_name: str
    fields: dict[str, Decoder]


def decode_struct(value: Any, schema: Schema, ctx: _Ctx, into: dict[str, Any]) -> None:
    """Decode one JSON object into ``into`` (JSON name -> Python value)."""
    if value is None:
        return
    if not _is_obj(value):
        ctx.type_error(value, schema.go_name)
        return
    folded = {k.lower(): k for k in schema.fields}
    for key, item in value:
        name = key if key in schema.fields else folded.get(key.lower())
        if name is None:
            ctx.fail(GoJSONError(f"json: unknown field {json.dumps(key, ensure_ascii=False)}"))
            continue
        ctx.path.append(name)
        try:
            out = schema.fields[name](item, ctx)
        finally:
            ctx.path.pop()
        if out is not _SKIP:
            into[name] = out


_SKIP = object()


def d_str(v: Any, ctx: _Ctx) -> Any:
    if v is None:
        return _SKIP
    if isinstance(v, str) and not isinstance(v, Num):
        return str(v)
    ctx.type_error(v, "string")
    return _SKIP


def d_bool(v: Any, ctx: _Ctx) -> Any:
    if v is None:
        return _SKIP
    if isinstance(v, bool):
        return v
    ctx.type_error(v, "bool")
    return _SKIP


def d_int(gotype: str, lo: int, hi: int) -> Decoder:
    def dec(v: Any, ctx: _Ctx) -> Any:
        if v is None:
            return _SKIP
        if isinstance(v, Num):
            try:
                n = int(v, 10)
            except ValueError:
                n = None
            if n is None or not lo <= n <= hi:
                ctx.type_error(v, gotype, literal=True)
                return _SKIP
            return n
        ctx.type_error(v, gotype)
        return _SKIP

    return dec


INT = d_int("int", -(2**63), 2**63 - 1)
INT32 = d_int("int32", -(2**31), 2**31 - 1)
INT64 = d_int("int64", -(2**63), 2**63 - 1)
UINT64 = d_int("uint64", 0, 2**64 - 1)
DURATION = d_int("time.Duration", -(2**63), 2**63 - 1)


def d_list(elem: Decoder, gotype: str) -> Decoder:
    def dec(v: Any, ctx: _Ctx) -> Any:
        if v is None:
            return _SKIP
        if not isinstance(v, list) or _is_obj(v):
            ctx.type_error(v, gotype)
            return _SKIP
        out = []
        for i, item in enumerate(v):
            ctx.path.append(str(i))
            try:
                r = elem(item, ctx)
            finally:
                ctx.path.pop()
            out.append(None if r is _SKIP else r)
        return out

    return dec


def d_str_map(v: Any, ctx: _Ctx) -> Any:
    if v is None:
        return _SKIP
    if not _is_obj(v):
        ctx.type_error(v, "map[string]string")
        return _SKIP
    out: dict[str, str] = {}
    for key, item in v:
        ctx.path.append(key)
        try:
            r = d_str(item, ctx)
        finally:
            ctx.path.pop()
        out[key] = "" if r is _SKIP else r
    return out


def d_struct(schema: Schema) -> Decoder:
    def dec(v: Any, ctx: _Ctx) -> Any:
        if v is None:
            return _SKIP
        out: dict[str, Any] = {}
        decode_struct(v, schema, ctx, out)
        return out

    return dec


def d_enum(allowed: dict[str, str], *, fold: bool = False) -> Decoder:
    """A Go enum with ``UnmarshalJSON`` switching on the raw text."""

    def dec(v: Any, ctx: _Ctx) -> Any:
        raw = _raw(v)
        key = raw.lower() if fold else raw
        if key in allowed:
            return allowed[key]
        ctx.fail(GoJSONError(f"can not unmarshal {go_quote(raw)}"))
        return _SKIP

    return dec


def d_compression(v: Any, ctx: _Ctx) -> Any:
    if v is None:
        return _SKIP
    if not isinstance(v, str) or isinstance(v, Num):
        ctx.fail(GoJSONError(f"json: cannot unmarshal {_kind(v)} into Go value of type string"))
        return _SKIP
    if v in ("s2", "none"):
        return str(v)
    ctx.fail(GoJSONError("unknown compression algorithm"))
    return _SKIP


def new_ctx(root: str) -> _Ctx:
    """A decoding context whose messages name ``root`` (e.g. ``StreamConfigRequest``)."""
    return _Ctx(root=root)
