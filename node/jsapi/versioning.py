"""JetStream API levels: what trijet reports, stores in asset metadata and demands.

Theory of operation
-------------------
nats-server 2.11 numbers the JetStream API (``JS_API_LEVEL``: 2.11 → 1) and
keeps versioning facts in three reserved metadata keys of stream and consumer
configs:

* ``_nats.req.level`` (*static*, stored): the lowest API level a server needs
  to run the asset.  Set on every STREAM.CREATE/UPDATE and CONSUMER.CREATE
  (and on PAUSE, which rewrites the consumer's config), computed from the
  config alone — a value the client sent is overwritten.  Level 1 for a
  stream with ``allow_msg_ttl`` or ``subject_delete_marker_ttl``; for a
  consumer with a ``pause_until``, a priority policy, ``priority_groups`` or
  a pinned TTL (``priority_timeout``); else 0.
* ``_nats.ver`` / ``_nats.level`` (*dynamic*): the server's version and API
  level, added to the config shown in create, info and update answers only;
  never stored (a client sending them has them removed), so LIST and /jsz
  show only stored keys.

When a recreate is compared with the existing asset, ``_nats.req.level`` is
taken from the existing one (nats-server's ``copy*Metadata``): a config
differing only there is identical.  Any other ``_nats.*`` key a client sends
is kept like user metadata.

The ``Nats-Required-Api-Level`` request header (nats-server 2.12+, honoured
here although 2.11 ignored it) refuses a request whose level is above
``JS_API_LEVEL`` or not an integer: API answers get 412/10185 in the
response type's own shape, pull requests and direct gets a ``412 Required Api
Level`` status message.  Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TypeVar

from cluster.consumer_model import ConsumerConfig, PriorityPolicy
from cluster.model import StreamConfig
from node.version import JS_API_LEVEL

__all__ = [
    "JS_API_LEVEL",
    "REQUIRED_LEVEL_HEADER",
    "REQUIRED_LEVEL_KEY",
    "REQUIRED_LEVEL_STATUS",
    "SERVER_LEVEL_KEY",
    "SERVER_VERSION_KEY",
    "consumer_required_level",
    "copy_required_level",
    "demands_higher_level",
    "drop_dynamic",
    "stream_required_level",
    "with_dynamic",
    "with_static_consumer",
    "with_static_stream",
]

REQUIRED_LEVEL_KEY = "_nats.req.level"
SERVER_VERSION_KEY = "_nats.ver"
SERVER_LEVEL_KEY = "_nats.level"
_DYNAMIC = (SERVER_VERSION_KEY, SERVER_LEVEL_KEY)
REQUIRED_LEVEL_HEADER = b"nats-required-api-level"
#: Header block answering a pull request or direct get that demands too much.
REQUIRED_LEVEL_STATUS = b"NATS/1.0 412 Required Api Level\r\n\r\n"

_GO_ZERO_TIME = "0001-01-01T00:00:00Z"
Pairs = tuple[tuple[str, str], ...]
C = TypeVar("C", StreamConfig, ConsumerConfig)


def drop_dynamic(metadata: dict[str, str]) -> dict[str, str]:
    """``metadata`` without ``_nats.ver``/``_nats.level`` (never stored)."""
    return {k: v for k, v in metadata.items() if k not in _DYNAMIC}


def _with_level(metadata: Iterable[tuple[str, str]], level: int) -> Pairs:
    d = drop_dynamic(dict(metadata))
    d[REQUIRED_LEVEL_KEY] = str(level)
    return tuple(sorted(d.items()))


def stream_required_level(cfg: StreamConfig) -> int:
    """The API level a stream config needs (per-message TTLs and markers: 1)."""
    return 1 if cfg.allow_msg_ttl or cfg.subject_delete_marker_ttl_ns > 0 else 0


def consumer_required_level(cfg: ConsumerConfig) -> int:
    """The API level a consumer config needs (pause, priority groups: 1)."""
    if cfg.pause_until and cfg.pause_until != _GO_ZERO_TIME:
        return 1
    if (
        cfg.priority_policy is not PriorityPolicy.NONE
        or cfg.priority_timeout_ns != 0
        or cfg.priority_groups
    ):
        return 1
    return 0


def with_static_stream(cfg: StreamConfig) -> StreamConfig:
    """``cfg`` with its stored ``_nats.req.level`` set and dynamic keys removed."""
    meta = _with_level(cfg.metadata, stream_required_level(cfg))
    return cfg if meta == cfg.metadata else _replace_meta(cfg, meta)


def with_static_consumer(cfg: ConsumerConfig) -> ConsumerConfig:
    """``cfg`` with its stored ``_nats.req.level`` set and dynamic keys removed."""
    meta = _with_level(cfg.metadata, consumer_required_level(cfg))
    return cfg if meta == cfg.metadata else _replace_meta(cfg, meta)


def copy_required_level(new: C, old: C) -> C:
    """``new`` carrying ``old``'s ``_nats.req.level`` (or none if ``old`` has none).

    For comparing a recreate with the existing asset while ignoring the
    versioning keys, as nats-server does.
    """
    d = drop_dynamic(dict(new.metadata))
    d.pop(REQUIRED_LEVEL_KEY, None)
    old_level = dict(old.metadata).get(REQUIRED_LEVEL_KEY)
    if old_level is not None:
        d[REQUIRED_LEVEL_KEY] = old_level
    return _replace_meta(new, tuple(sorted(d.items())))


def with_dynamic(metadata: dict[str, str], version: str) -> dict[str, str]:
    """The metadata a create/info/update answer shows: stored keys plus the
    server's version and level, key-sorted as Go writes a map."""
    d = dict(metadata)
    d[SERVER_VERSION_KEY] = version
    d[SERVER_LEVEL_KEY] = str(JS_API_LEVEL)
    return dict(sorted(d.items()))


def demands_higher_level(headers: bytes | None) -> bool:
    """Whether a request's ``Nats-Required-Api-Level`` refuses it here.

    True when the header is present and non-empty but not an integer, or an
    integer above ``JS_API_LEVEL`` (nats-server's ``errorOnRequiredApiLevel``).
    """
    if not headers or REQUIRED_LEVEL_HEADER not in headers.lower():
        return False
    for line in headers.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == REQUIRED_LEVEL_HEADER:
            text = value.strip()
            if not text:
                return False
            digits = text[1:] if text[:1] in (b"+", b"-") else text
            if not digits.isdigit() or len(digits.lstrip(b"0")) > 19:
                return True  # Go's strconv.Atoi refuses it
            return int(text) > JS_API_LEVEL
    return False


def _replace_meta(cfg: C, meta: Pairs) -> C:
    return dataclasses.replace(cfg, metadata=meta)
