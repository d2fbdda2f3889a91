"""Request bodies of the stream and message API calls, decoded as nats-server decodes them.

Theory of operation: nats-server reads these bodies with its strict decoder
(``json.Decoder`` + ``DisallowUnknownFields``, every concatenated value in
turn, into one Go struct), so a bad body is answered with 10025 ``invalid
JSON: <Go's message>``.  Each request here is a ``godecode.Schema`` naming the
Go types of its fields; ``decode`` returns a plain dict holding only the
fields that were sent (absent fields are Go zero values, filled in by the
callers).  Before decoding, nats-server looks at the body in one of two ways,
depending on the call, and both are reproduced:

* ``is_json_object_or_array``: INFO, NAMES, LIST and PURGE decode the body
  only when its first non-blank byte is ``{`` or ``[``; anything else
  (``x``, ``null``, a number) is the same as no body at all.
* ``is_empty_request``: MSG.GET and MSG.DELETE refuse an empty body (and
  ``{}``, or any JSON object without keys) with 10003 before decoding; DELETE
  refuses anything else with 10038.

``decode_lenient`` is Go's plain ``json.Unmarshal`` used by direct gets:
unknown fields are ignored, any other problem is an error.  Pure: no I/O.
"""

from __future__ import annotations

import datetime
from typing import Any

from node.jsapi.errors import INVALID_JSON, JSApiError
from node.jsapi.godecode import (
    _SKIP,
    INT,
    UINT64,
    Decoder,
    GoJSONError,
    Num,
    Schema,
    _Ctx,
    _Obj,
    d_bool,
    d_list,
    d_str,
    decode_struct,
    go_quote,
    new_ctx,
    scan_go,
)
from node.jsapi.streamrequest import PLACEMENT

__all__ = [
    "LEADER_STEPDOWN",
    "MSG_DELETE",
    "MSG_GET",
    "PURGE",
    "STREAM_INFO",
    "STREAM_LIST",
    "STREAM_NAMES",
    "Request",
    "decode",
    "decode_lenient",
    "is_empty_request",
    "is_json_object_or_array",
    "parse_rfc3339",
]


def _d_time_ns(v: Any, ctx: _Ctx) -> Any:
    """``*time.Time``: Go's RFC 3339 parsing; the value as Unix nanoseconds."""
    if v is None:
        return _SKIP
    if not isinstance(v, str) or isinstance(v, Num):
        ctx.type_error(v, "time.Time")
        return _SKIP
    try:
        return parse_rfc3339(str(v))
    except GoJSONError as exc:
        ctx.fail(exc)
        return _SKIP


_LAYOUT = "2006-01-02T15:04:05Z07:00"
#: layout elements: (element, digits (0 for a literal), range name, low, high)
_ELEMENTS = (
    ("2006", 4, "", 0, 9999),
    ("-", 0, "", 0, 0),
    ("01", 2, "month", 1, 12),
    ("-", 0, "", 0, 0),
    ("02", 2, "day", 1, 31),
    ("T", 0, "", 0, 0),
    ("15", 2, "hour", 0, 23),
    (":", 0, "", 0, 0),
    ("04", 2, "minute", 0, 59),
    (":", 0, "", 0, 0),
    ("05", 2, "second", 0, 59),
)


def _time_error(value: str, message: str) -> GoJSONError:
    return GoJSONError(f"parsing time {go_quote(value)}{message}")


def _cannot(value: str, rest: str, elem: str) -> GoJSONError:
    return _time_error(
        value, f" as {go_quote(_LAYOUT)}: cannot parse {go_quote(rest)} as {go_quote(elem)}"
    )


def parse_rfc3339(value: str) -> int:
    """Go's ``time.Parse(time.RFC3339, value)`` as Unix nanoseconds.

    Raises:
        GoJSONError: with Go's message (``parsing time "x" as "…": cannot
            parse "x" as "2006"``, ``…: month out of range``, ``…: extra text: …``).
    """
    rest = value
    nums: list[int] = []
    for elem, digits, what, lo, hi in _ELEMENTS:
        if not digits:
            if not rest.startswith(elem):
                raise _cannot(value, rest, elem)
            rest = rest[1:]
            continue
        head = rest[:digits]
        if len(head) < digits or not head.isascii() or not head.isdigit():
            raise _cannot(value, rest, elem)
        n = int(head)
        if what and not lo <= n <= hi:
            raise _time_error(value, f": {what} out of range")
        nums.append(n)
        rest = rest[digits:]
    nanos = 0
    if rest[:1] == "." and rest[1:2].isdigit():
        frac = rest[1:]
        digits = len(frac) - len(frac.lstrip("0123456789"))
        nanos = int((frac[:digits] + "000000000")[:9])
        rest = frac[digits:]
    offset_s = 0
    if rest[:1] == "Z":
        rest = rest[1:]
    else:
        zone = rest[:6]
        ok = len(zone) == 6 and zone[0] in "+-" and zone[3] == ":"
        ok = ok and zone[1:3].isdigit() and zone[4:6].isdigit()
        if not ok:
            raise _cannot(value, rest, "Z07:00")
        offset_s = (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60) * (-1 if zone[0] == "-" else 1)
        rest = rest[6:]
    if rest:
        raise _time_error(value, f": extra text: {go_quote(rest)}")
    year, month, day, hour, minute, second = nums
    try:
        dt = datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.UTC)
    except ValueError:
        raise _time_error(value, ": day out of range") from None
    secs = int(dt.timestamp()) - offset_s
    return secs * 1_000_000_000 + nanos


class Request:
    """A request type: its Go name (for messages) and field schema."""

    def __init__(self, go_name: str, fields: dict[str, Decoder]) -> None:
        self.go_name = go_name
        self.schema = Schema("server." + go_name, fields)


_PAGED = {"offset": INT}

STREAM_INFO = Request(
    "JSApiStreamInfoRequest",
    {**_PAGED, "deleted_details": d_bool, "subjects_filter": d_str},
)
LEADER_STEPDOWN = Request("JSApiLeaderStepdownRequest", {"placement": PLACEMENT})
STREAM_NAMES = Request("JSApiStreamNamesRequest", {**_PAGED, "subject": d_str})
STREAM_LIST = Request("JSApiStreamListRequest", {**_PAGED, "subject": d_str})
PURGE = Request("JSApiStreamPurgeRequest", {"seq": UINT64, "filter": d_str, "keep": UINT64})
MSG_DELETE = Request("JSApiMsgDeleteRequest", {"seq": UINT64, "no_erase": d_bool})
MSG_GET = Request(
    "JSApiMsgGetRequest",
    {
        "seq": UINT64,
        "last_by_subj": d_str,
        "next_by_subj": d_str,
        "batch": INT,
        "max_bytes": INT,
        "start_time": _d_time_ns,
        "multi_last": d_list(d_str, "[]string"),
        "up_to_seq": UINT64,
        "up_to_time": _d_time_ns,
        "no_hdr": d_bool,
    },
)


def decode(body: bytes, request: Request) -> dict[str, Any]:
    """Decode ``body`` strictly (unknown fields refused), as nats-server does.

    Returns:
        The fields sent, by JSON name (``null`` leaves a field out).

    Raises:
        JSApiError: 10025 ``invalid JSON: <Go message>``.
    """
    try:
        values = scan_go(body)
    except GoJSONError as exc:
        raise JSApiError(INVALID_JSON, err=str(exc)) from None
    out: dict[str, Any] = {}
    for value in values:
        ctx = new_ctx(request.go_name)
        decode_struct(value, request.schema, ctx, out)
        if ctx.first is not None:
            raise JSApiError(INVALID_JSON, err=str(ctx.first))
    return out


def decode_lenient(body: bytes, request: Request) -> dict[str, Any] | None:
    """Go's ``json.Unmarshal``: one value, unknown fields ignored.

    Returns:
        The fields sent, or None when Go would fail (syntax, types, trailing data).
    """
    try:
        values = scan_go(body)
    except GoJSONError:
        return None
    if len(values) != 1:
        return None
    value = values[0]
    if isinstance(value, _Obj):
        value = _Obj((k, v) for k, v in value if _field(request, k) is not None)
    ctx = new_ctx(request.go_name)
    out: dict[str, Any] = {}
    decode_struct(value, request.schema, ctx, out)
    return None if ctx.first is not None else out


def unmarshal(body: bytes, request: Request) -> dict[str, Any]:
    """Go's ``json.Unmarshal`` into ``request`` (one value, unknown fields
    ignored), raising its error as nats-server answers it.

    Raises:
        JSApiError: 10025 ``invalid JSON: <Go message>``.
    """
    from node.jetstream.pullreq import unmarshal_value

    value, err = unmarshal_value(body)
    if err is not None:
        raise JSApiError(INVALID_JSON, err=err)
    if isinstance(value, _Obj):
        value = _Obj((k, v) for k, v in value if _field(request, k) is not None)
    ctx = new_ctx(request.go_name)
    out: dict[str, Any] = {}
    decode_struct(value, request.schema, ctx, out)
    if ctx.first is not None:
        raise JSApiError(INVALID_JSON, err=str(ctx.first))
    return out


def _field(request: Request, key: str) -> str | None:
    fields = request.schema.fields
    if key in fields:
        return key
    return next((k for k in fields if k.lower() == key.lower()), None)


def is_json_object_or_array(body: bytes) -> bool:
    """nats-server's test: the first non-blank byte is ``{`` or ``[``."""
    text = body.lstrip(b" \t\r\n")
    return text[:1] in (b"{", b"[")


def is_empty_request(body: bytes) -> bool:
    """nats-server's test: no body, ``{}``, or one JSON object without keys."""
    if not body or body == b"{}":
        return True
    try:
        values = scan_go(body)
    except GoJSONError:
        return False
    return len(values) == 1 and isinstance(values[0], _Obj) and not values[0]
