"""STREAM.CREATE / STREAM.UPDATE request bodies -> ``StreamConfig`` holding Go zero values.

Theory of operation: the request is decoded the way nats-server's
``json.Decoder`` with ``DisallowUnknownFields`` decodes it into its Go
``StreamConfigRequest`` (see ``godecode``): a ``Schema`` names every field's
Go type, so type errors carry Go's wording (10025 ``invalid JSON: …``).  The
result holds zero values; defaults and validation are ``streamconfig``'s job.
The dynamic versioning keys ``_nats.ver``/``_nats.level`` are dropped from
``metadata`` (never stored, see ``versioning``); other ``_nats.*`` keys stay.
Pure: no I/O.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import Any

from cluster.model import (
    StreamConfig,
)
from node.jsapi.errors import (
    INVALID_JSON,
    JSApiError,
)
from node.jsapi.godecode import (
    _SKIP,
    DURATION,
    INT,
    INT32,
    INT64,
    UINT64,
    Decoder,
    GoJSONError,
    Num,
    Schema,
    _Ctx,
    _Obj,
    _raw,
    d_bool,
    d_compression,
    d_enum,
    d_list,
    d_str,
    d_str_map,
    d_struct,
    decode_struct,
    go_quote,
    new_ctx,
    scan_go,
)
from node.jsapi.versioning import drop_dynamic

__all__ = ["StreamRequest", "decode_request"]

_TRANSFORM = Schema("SubjectTransformConfig", {"src": d_str, "dest": d_str})
_EXTERNAL = Schema("server.ExternalStream", {"api": d_str, "deliver": d_str})
_SRC_CONSUMER = Schema("server.StreamConsumerSource", {"name": d_str, "deliver_subject": d_str})


def _d_time(v: Any, ctx: _Ctx) -> Any:
    if v is None:
        return _SKIP
    if not isinstance(v, str) or isinstance(v, Num):
        ctx.fail(GoJSONError("Time.UnmarshalJSON: input is not a JSON string"))
        return _SKIP
    norm = _rfc3339_normalise(str(v))
    if norm is None:
        ctx.fail(
            GoJSONError(
                f"parsing time {go_quote(_raw(v))} as {go_quote(chr(34) + _GO_RFC3339 + chr(34))}"
            )
        )
        return _SKIP
    return norm


_GO_RFC3339 = "2006-01-02T15:04:05Z07:00"
_RFC3339_RE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")


def _rfc3339_normalise(s: str) -> str | None:
    """Go re-emits a parsed time as RFC3339Nano in its own offset (``Z`` for 0)."""
    m = _RFC3339_RE.match(s)
    if m is None:
        return None
    base, frac, zone = m.groups()
    try:
        datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    frac = (frac or "").rstrip("0")
    if frac == ".":
        frac = ""
    if zone in ("+00:00", "-00:00"):
        zone = "Z"
    return base + frac + zone


_SOURCE = Schema(
    "StreamSource",
    {
        "name": d_str,
        "opt_start_seq": UINT64,
        "opt_start_time": _d_time,
        "filter_subject": d_str,
        "subject_transforms": d_list(d_struct(_TRANSFORM), "[]server.SubjectTransformConfig"),
        "external": d_struct(_EXTERNAL),
        "consumer": d_struct(_SRC_CONSUMER),
    },
)


def _typed_struct(schema: Schema, gotype: str) -> Decoder:
    inner = d_struct(schema)

    def dec(v: Any, ctx: _Ctx) -> Any:
        if v is not None and not isinstance(v, _Obj):
            ctx.type_error(v, gotype)
            return _SKIP
        return inner(v, ctx)

    return dec


PLACEMENT = _typed_struct(
    Schema("Placement", {"cluster": d_str, "tags": d_list(d_str, "[]string"), "preferred": d_str}),
    "server.Placement",
)
"""A ``server.Placement`` (stream config, leader stepdown requests)."""


_STREAM_REQUEST = Schema(
    "server.StreamConfigRequest",
    {
        "name": d_str,
        "description": d_str,
        "subjects": d_list(d_str, "[]string"),
        "retention": d_enum(
            {'"limits"': "limits", '"interest"': "interest", '"workqueue"': "workqueue"}
        ),
        "max_consumers": INT,
        "max_msgs": INT64,
        "max_bytes": INT64,
        "max_age": DURATION,
        "max_msgs_per_subject": INT64,
        "max_msg_size": INT32,
        "discard": d_enum({'"old"': "old", '"new"': "new"}, fold=True),
        "storage": d_enum({'"file"': "file", '"memory"': "memory"}),
        "num_replicas": INT,
        "no_ack": d_bool,
        "duplicate_window": DURATION,
        "placement": PLACEMENT,
        "mirror": _typed_struct(_SOURCE, "server.StreamSource"),
        "sources": d_list(_typed_struct(_SOURCE, "server.StreamSource"), "[]*server.StreamSource"),
        "compression": d_compression,
        "first_seq": UINT64,
        "subject_transform": _typed_struct(_TRANSFORM, "server.SubjectTransformConfig"),
        "republish": _typed_struct(
            Schema("RePublish", {"src": d_str, "dest": d_str, "headers_only": d_bool}),
            "server.RePublish",
        ),
        "allow_direct": d_bool,
        "mirror_direct": d_bool,
        "discard_new_per_subject": d_bool,
        "sealed": d_bool,
        "deny_delete": d_bool,
        "deny_purge": d_bool,
        "allow_rollup_hdrs": d_bool,
        "consumer_limits": _typed_struct(
            Schema(
                "StreamConsumerLimits", {"inactive_threshold": DURATION, "max_ack_pending": INT}
            ),
            "server.StreamConsumerLimits",
        ),
        "allow_msg_ttl": d_bool,
        "subject_delete_marker_ttl": DURATION,
        "allow_msg_counter": d_bool,
        "allow_atomic": d_bool,
        "allow_msg_schedules": d_bool,
        "persist_mode": d_enum({'"default"': "default", '""': "default", '"async"': "async"}),
        "allow_batched": d_bool,
        "metadata": d_str_map,
        "pedantic": d_bool,
    },
)

#: Go zero values of every ``StreamConfig`` JSON field (before normalisation).
_ZERO: dict[str, Any] = {
    "retention": "limits",
    "max_consumers": 0,
    "max_msgs": 0,
    "max_bytes": 0,
    "max_age": 0,
    "max_msgs_per_subject": 0,
    "max_msg_size": 0,
    "discard": "old",
    "storage": "file",
    "num_replicas": 0,
    "duplicate_window": 0,
    "compression": "none",
}


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """A decoded STREAM.CREATE/UPDATE body, not yet normalised.

    Attributes:
        config: The request as a ``StreamConfig`` holding Go zero values
            (``max_msgs=0``, ``num_replicas=0`` …) where fields were absent.
        pedantic: The request's ``pedantic`` flag.
    """

    config: StreamConfig
    pedantic: bool = False


def decode_request(body: bytes) -> StreamRequest:
    """Decode a STREAM.CREATE/UPDATE body as nats-server's strict decoder does.

    Concatenated JSON values are decoded one after the other into the same
    request (Go's ``json.Decoder`` loop); an empty body is an empty request.

    Raises:
        JSApiError: 10025 ``invalid JSON: <Go message>``.
    """
    try:
        values = scan_go(body)
    except GoJSONError as exc:
        raise JSApiError(INVALID_JSON, err=str(exc)) from None
    raw: dict[str, Any] = {}
    for value in values:
        ctx = new_ctx("StreamConfigRequest")
        decode_struct(value, _STREAM_REQUEST, ctx, raw)
        if ctx.first is not None:
            raise JSApiError(INVALID_JSON, err=str(ctx.first))
    pedantic = raw.pop("pedantic", False) is True
    merged = dict(_ZERO)
    merged.update({k: v for k, v in raw.items() if v is not None})
    if isinstance(merged.get("metadata"), dict):
        merged["metadata"] = drop_dynamic(merged["metadata"])
    return StreamRequest(StreamConfig.from_dict(merged), pedantic)
