"""CONSUMER.CREATE request bodies and subject forms -> ``CreateRequest``.

Theory of operation
-------------------
The first of nats-server's three create stages (defaults and validation,
the other two, are ``consumerconfig``'s job); its errors reach the client
before theirs:

* ``decode_create`` decodes the ``CreateConsumerRequest`` body the way Go's
  strict decoder does (``godecode``: 10025 ``invalid JSON: …`` with Go's
  wording, including ``time.Parse`` errors for ``opt_start_time`` and
  ``pause_until`` and the custom ``UnmarshalJSON`` texts of the priority
  policy and the action).  The dynamic ``_nats.ver``/``_nats.level``
  metadata keys are dropped and the stored ``_nats.req.level`` set (see
  ``versioning``); the config keeps Go zero values.
* ``parse_create`` then applies the rules of the subject form,
  ``$JS.API.CONSUMER.CREATE.<stream>[.<name>[.<filter…>]]`` or
  ``$JS.API.CONSUMER.DURABLE.CREATE.<stream>.<durable>`` (10056, 10127,
  10018, 10017, 10020, 10137, 10131), and refuses replicas > 1 on a single
  server (10074).  The returned config carries the subject's consumer name.

Pure: no I/O.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace
from typing import Any

from cluster.consumer_model import ConsumerConfig
from node.jsapi.errors import (
    CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH,
    CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT,
    CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT,
    CONSUMER_DURABLE_NAME_NOT_SET,
    CONSUMER_EPHEMERAL_WITH_DURABLE_NAME,
    CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED,
    CONSUMER_NAME_CONTAINS_PATH_SEPARATORS,
    INVALID_JSON,
    STREAM_MISMATCH,
    STREAM_REPLICAS_NOT_SUPPORTED,
    JSApiError,
)
from node.jsapi.godecode import (
    _SKIP,
    DURATION,
    INT,
    UINT64,
    Decoder,
    GoJSONError,
    Num,
    Schema,
    _Ctx,
    _raw,
    d_bool,
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
from node.jsapi.streamrequest import _rfc3339_normalise
from node.jsapi.versioning import drop_dynamic, with_static_consumer

__all__ = ["Action", "CreateRequest", "decode_create", "parse_create"]


class Action(enum.Enum):
    """The request's ``action`` (2.10+)."""

    CREATE_OR_UPDATE = ""
    UPDATE = "update"
    CREATE = "create"


def _d_custom_enum(allowed: dict[str, Any], prefix: str) -> Decoder:
    """A Go enum whose ``UnmarshalJSON`` says ``<prefix><raw text>``."""

    def dec(v: Any, ctx: _Ctx) -> Any:
        raw = _raw(v)
        if raw in allowed:
            return allowed[raw]
        ctx.fail(GoJSONError(prefix + raw))
        return _SKIP

    return dec


_LAYOUT = (
    ("2006", r"\d{4}"),
    ("-", "-"),
    ("01", r"\d{2}"),
    ("-", "-"),
    ("02", r"\d{2}"),
    ("T", "T"),
    ("15", r"\d{2}"),
    (":", ":"),
    ("04", r"\d{2}"),
    (":", ":"),
    ("05", r"\d{2}(\.\d+)?"),
    ("Z07:00", r"Z|[+-]\d{2}:\d{2}"),
)


def _time_error(text: str) -> str:
    """Go's ``time.Parse(RFC3339)`` error for ``text``."""
    head = f"parsing time {json_quote(text)} as {json_quote(_GO_RFC3339)}"
    rest = text
    for i, (elem, pattern) in enumerate(_LAYOUT):
        m = re.match(pattern, rest)
        if m is None:
            return f"{head}: cannot parse {json_quote(rest)} as {json_quote(elem)}"
        rest = rest[m.end() :]
        if i == len(_LAYOUT) - 1 and rest:
            return f"{head}: extra text: {json_quote(rest)}"
    return f"{head}: day out of range"


def json_quote(s: str) -> str:
    """Go's ``strconv.Quote`` for the texts that appear in time errors."""
    return go_quote(s)


_GO_RFC3339 = "2006-01-02T15:04:05Z07:00"


def _d_time(v: Any, ctx: _Ctx) -> Any:
    """A ``*time.Time`` field (RFC3339 text, re-emitted as Go does)."""
    if v is None:
        return _SKIP
    if not isinstance(v, str) or isinstance(v, Num):
        ctx.fail(GoJSONError("Time.UnmarshalJSON: input is not a JSON string"))
        return _SKIP
    norm = _rfc3339_normalise(str(v))
    if norm is None:
        ctx.fail(GoJSONError(_time_error(str(v))))
        return _SKIP
    return norm


_DELIVER = d_enum(
    {
        '"all"': "all",
        '"undefined"': "all",
        '"last"': "last",
        '"new"': "new",
        '"by_start_sequence"': "by_start_sequence",
        '"by_start_time"': "by_start_time",
        '"last_per_subject"': "last_per_subject",
    }
)
_ACK = d_enum(
    {'"none"': "none", '"all"': "all", '"explicit"': "explicit", '"flow_control"': "flow_control"}
)
_REPLAY = d_enum({'"instant"': "instant", '"original"': "original"})
_PRIORITY = _d_custom_enum(
    {
        '"none"': "none",
        '"overflow"': "overflow",
        '"pinned_client"': "pinned_client",
        '"prioritized"': "prioritized",
    },
    "unknown priority policy: ",
)
_ACTION = _d_custom_enum(
    {'"create"': Action.CREATE, '"update"': Action.UPDATE, '""': Action.CREATE_OR_UPDATE},
    "unknown consumer action: ",
)

_CONFIG = Schema(
    "server.ConsumerConfig",
    {
        "durable_name": d_str,
        "name": d_str,
        "description": d_str,
        "deliver_policy": _DELIVER,
        "opt_start_seq": UINT64,
        "opt_start_time": _d_time,
        "ack_policy": _ACK,
        "ack_wait": DURATION,
        "max_deliver": INT,
        "backoff": d_list(DURATION, "[]time.Duration"),
        "filter_subject": d_str,
        "filter_subjects": d_list(d_str, "[]string"),
        "replay_policy": _REPLAY,
        "rate_limit_bps": UINT64,
        "sample_freq": d_str,
        "max_waiting": INT,
        "max_ack_pending": INT,
        "flow_control": d_bool,
        "headers_only": d_bool,
        "max_batch": INT,
        "max_expires": DURATION,
        "max_bytes": INT,
        "deliver_subject": d_str,
        "deliver_group": d_str,
        "idle_heartbeat": DURATION,
        "inactive_threshold": DURATION,
        "num_replicas": INT,
        "mem_storage": d_bool,
        "direct": d_bool,
        "sourcing": d_bool,
        "metadata": d_str_map,
        "pause_until": _d_time,
        "priority_groups": d_list(d_str, "[]string"),
        "priority_policy": _PRIORITY,
        "priority_timeout": DURATION,
    },
)

_REQUEST = Schema(
    "CreateConsumerRequest",
    {
        "stream_name": d_str,
        "config": d_struct(_CONFIG),
        "action": _ACTION,
        "pedantic": d_bool,
    },
)


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """A decoded ``CreateConsumerRequest`` (config still at Go zero values).

    Attributes:
        stream: ``stream_name``.
        config: the config with the consumer name of the subject applied.
        action: create, update or create-or-update.
        pedantic: no silent normalisation (10157 instead).
        legacy_ephemeral: created on ``CONSUMER.CREATE.<stream>`` (no name
            token): the name is ``config.name`` or generated.
    """

    stream: str
    config: ConsumerConfig
    action: Action = Action.CREATE_OR_UPDATE
    pedantic: bool = False
    legacy_ephemeral: bool = False


def decode_create(body: bytes) -> CreateRequest:
    """Decode a ``CreateConsumerRequest`` as nats-server's strict decoder does.

    Raises:
        JSApiError: 10025 ``invalid JSON: <Go message>``.
    """
    try:
        values = scan_go(body)
    except GoJSONError as exc:
        raise JSApiError(INVALID_JSON, err=str(exc)) from None
    raw: dict[str, Any] = {}
    for value in values:
        ctx = new_ctx("CreateConsumerRequest")
        decode_struct(value, _REQUEST, ctx, raw)
        if ctx.first is not None:
            raise JSApiError(INVALID_JSON, err=str(ctx.first))
    cfg_raw = dict(raw.get("config") or {})
    cfg_raw.pop("sourcing", None)
    if isinstance(cfg_raw.get("metadata"), dict):
        cfg_raw["metadata"] = drop_dynamic(cfg_raw["metadata"])
    return CreateRequest(
        stream=str(raw.get("stream_name") or ""),
        config=with_static_consumer(ConsumerConfig.from_dict(cfg_raw)),
        action=raw.get("action", Action.CREATE_OR_UPDATE),
        pedantic=raw.get("pedantic") is True,
    )


def parse_create(op: tuple[str, ...], body: bytes, *, clustered: bool = False) -> CreateRequest:
    """Decode a create request and apply the rules of its subject form.

    Args:
        op: the subject's tokens after ``API`` (``("CONSUMER", "CREATE", "S",
            "n", …)`` or ``("CONSUMER", "DURABLE", "CREATE", "S", "d")``).
        body: the request payload.
        clustered: False refuses ``num_replicas`` > 1 (10074).

    Returns:
        The request whose ``config.name`` is the subject's consumer name.

    Raises:
        JSApiError: in nats-server's order (10025, 10016, 10056, 10127,
            10018, 10017, 10020, 10137, 10131, 10074).
    """
    req = decode_create(body)
    cfg = req.config
    legacy_durable = op[1] == "DURABLE"
    filtered = ""
    if legacy_durable:
        if len(op) != 5:
            raise JSApiError(CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT)
        stream, name = op[3], op[4]
    elif len(op) == 3:
        stream, name = op[2], cfg.name
    else:
        stream, name = op[2], op[3]
        filtered = ".".join(op[4:])
    legacy_ephemeral = not legacy_durable and len(op) == 3
    if stream != req.stream:
        raise JSApiError(STREAM_MISMATCH)
    if name and ("\\" in name or "/" in name):
        raise JSApiError(CONSUMER_NAME_CONTAINS_PATH_SEPARATORS)
    if legacy_durable:
        if not cfg.durable_name:
            raise JSApiError(CONSUMER_DURABLE_NAME_NOT_SET)
        if name != cfg.durable_name:
            raise JSApiError(CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT)
        cfg = replace(cfg, name=name)
    elif not legacy_ephemeral:
        if cfg.durable_name and name != cfg.durable_name:
            raise JSApiError(CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT)
        cfg = replace(cfg, name=name)
    if legacy_ephemeral and cfg.durable_name:
        raise JSApiError(CONSUMER_EPHEMERAL_WITH_DURABLE_NAME)
    if filtered and cfg.filter_subjects:
        raise JSApiError(CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED)
    if filtered and cfg.filter_subject != filtered:
        raise JSApiError(CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH)
    if not clustered and cfg.num_replicas > 1:
        raise JSApiError(STREAM_REPLICAS_NOT_SUPPORTED)
    return replace(req, config=cfg, legacy_ephemeral=legacy_ephemeral)
