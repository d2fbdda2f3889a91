"""``CONSUMER.MSG.NEXT`` request bodies, read as nats-server reads them.

Theory of operation: nats-server takes an empty body as one message, a bare
number as a batch size, anything else that does not start with ``{`` as one
message, and decodes an object with Go's ``json.Unmarshal`` into
``JSApiConsumerGetNextRequest`` (unknown keys ignored, keys matched
case-insensitively, the first type error reported, syntax errors without
their offset).  A refusal is the text that follows ``400 Bad Request - ``
in the status message.  Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cluster.consumer_model import ConsumerConfig
from node.jsapi.godecode import (
    DURATION,
    INT,
    INT64,
    GoJSONError,
    d_bool,
    d_str,
    first_value_end,
    new_ctx,
    scan_go,
)

__all__ = ["PullSpec", "decode_pull", "parse_pull", "priority_refusal"]


@dataclass(frozen=True, slots=True)
class PullSpec:
    """A decoded ``MSG.NEXT`` body (``JSApiConsumerGetNextRequest``)."""

    batch: int = 1
    expires_ns: int = 0
    no_wait: bool = False
    max_bytes: int = 0
    hb_ns: int = 0
    #: a JSON request (carries a priority group, possibly empty)
    formal: bool = False
    group: str = ""
    min_pending: int = 0
    min_ack_pending: int = 0
    pin_id: str = ""
    priority: int = 0


_PULL_FIELDS: dict[str, Any] = {
    "expires": DURATION,
    "batch": INT,
    "max_bytes": INT,
    "no_wait": d_bool,
    "idle_heartbeat": DURATION,
    "group": d_str,
    "min_pending": INT64,
    "min_ack_pending": INT64,
    "id": d_str,
    "priority": INT,
}
_AT_OFFSET = re.compile(r" at offset \d+$")


def decode_pull(body: bytes) -> PullSpec | str:
    """A ``MSG.NEXT`` body as nats-server reads it, or the 400 reason (Go's text).

    Empty -> one message; a number -> that batch; anything else that is not
    a JSON object -> one message.  An object is read like Go's
    ``json.Unmarshal``: unknown keys ignored, keys matched case-insensitively,
    the first type error reported, syntax errors without their offset.
    """
    text = body.strip()
    if not text:
        return PullSpec()
    if text[:1] != b"{":
        try:
            return PullSpec(batch=int(text))
        except ValueError:
            return PullSpec()
    values, err = unmarshal_value(text)
    if err is not None:
        return err
    ctx = new_ctx("")
    got: dict[str, Any] = {}
    folded = {k.lower(): k for k in _PULL_FIELDS}
    for key, item in values:
        name = key if key in _PULL_FIELDS else folded.get(key.lower())
        if name is None:
            continue
        ctx.path.append(name)
        out = _PULL_FIELDS[name](item, ctx)
        ctx.path.pop()
        if isinstance(out, (int, str)):
            got[name] = out
    if ctx.first is not None:
        return str(ctx.first)
    expires, hb = got.get("expires", 0), got.get("idle_heartbeat", 0)
    if hb > 0 and hb * 2 > expires:
        return "heartbeat value too large"
    return PullSpec(
        batch=got.get("batch", 0),
        expires_ns=expires,
        no_wait=got.get("no_wait", False),
        max_bytes=got.get("max_bytes", 0),
        hb_ns=hb,
        formal=True,
        group=got.get("group", ""),
        min_pending=got.get("min_pending", 0),
        min_ack_pending=got.get("min_ack_pending", 0),
        pin_id=got.get("id", ""),
        priority=got.get("priority", 0),
    )


def unmarshal_value(text: bytes) -> tuple[Any, str | None]:
    """``(value, None)``: the one JSON value of ``text`` as Go's
    ``json.Unmarshal`` reads it; ``(None, error)``: its syntax error text
    (without the offset Go's message leaves out)."""
    try:
        values = scan_go(text)
    except GoJSONError as e:
        msg = str(e)
        if msg == "unexpected EOF":
            return None, "unexpected end of JSON input"
        end = first_value_end(text)  # Unmarshal wants exactly one value
        if end is None:
            return None, _AT_OFFSET.sub("", msg)
        rest = text[end:].decode(errors="replace").lstrip(" \t\r\n")
        return None, f"invalid character {rest[:1]!r} after top-level value"
    if not values:
        return None, "unexpected end of JSON input"
    if len(values) != 1:
        return None, "invalid character '{' after top-level value"
    return values[0], None


def parse_pull(body: bytes) -> tuple[int, int, bool, int, int] | str:
    """``(batch, expires_ns, no_wait, max_bytes, idle_heartbeat_ns)`` or a 400 reason."""
    spec = decode_pull(body)
    if isinstance(spec, str):
        return spec
    return spec.batch, spec.expires_ns, spec.no_wait, spec.max_bytes, spec.hb_ns


def priority_refusal(spec: PullSpec, cfg: ConsumerConfig) -> str | None:
    """nats-server's 400 reasons for priority-group fields a consumer cannot take."""
    if not spec.formal:
        return None
    policy = cfg.priority_policy.value
    if (spec.min_pending or spec.min_ack_pending) and policy != "overflow":
        return "Not a Overflow Priority consumer"
    if spec.pin_id and policy != "pinned_client":
        return "Not a Pinned Client Priority consumer"
    if not 0 <= spec.priority <= 9:
        return "Priority must be between 0 and 9"
    if policy != "none":
        if not spec.group:
            return "Priority Group missing"
        if spec.group not in cfg.priority_groups:
            return "Invalid Priority Group"
    return None
