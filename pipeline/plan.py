"""Pure planning for the ``jetstream`` Spark source and sink: options, offsets, ranges, msg ids.

Theory of operation: everything here is arithmetic on strings and integers — no Spark, no
network — so it is unit-tested on its own and is the same on the driver and on executors.

* **Offsets are stream sequences.**  An offset is ``{"stream": S, "next": n}``: ``n`` is the
  first sequence *not yet* read.  A micro-batch covers the half-open range ``[start.next,
  end.next)``.  Gaps (deleted messages, subjects outside the filter) are harmless: a task stops
  by sequence, never by count.
* **Ranges split by sequence.**  ``split_range(a, b, …)`` cuts ``[a, b)`` into contiguous,
  non-overlapping sub-ranges whose union is exactly ``[a, b)`` — a pure function of its
  arguments, so Spark can re-plan a batch from its offset log after a crash and get the same
  tasks.
* **Options are strings** (Spark hands them over case-insensitively).  ``SourceOptions.parse``
  and ``SinkOptions.parse`` validate and convert them once and fail with the option's name.
* **Message ids are deterministic.**  The sink publishes each row with ``Nats-Msg-Id`` taken
  from a column or built as a hash of the row's subject, headers and payload, so a re-run task
  or micro-batch republishes the same ids and the stream's duplicate window drops them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

EARLIEST = "earliest"
LATEST = "latest"
DEFAULT_MIN_PARTITIONS = 2
DEFAULT_MAX_PER_PARTITION = 50_000
DEFAULT_FETCH_BATCH = 4096
DEFAULT_FETCH_TIMEOUT_MS = 5_000
DEFAULT_MAX_INFLIGHT = 2048
DEFAULT_PUBLISH_TIMEOUT_MS = 30_000
MSG_ID_MODES = ("auto", "column", "hash", "none")


class OptionError(ValueError):
    """An option is missing or malformed (the message names it)."""


class DataLossError(RuntimeError):
    """Sequences the query still had to read are gone from the stream (purge, limits)."""


# -- offsets -------------------------------------------------------------------


def make_offset(stream: str, next_seq: int) -> dict[str, Any]:
    """The JSON-able offset meaning "everything below ``next_seq`` has been read"."""
    if next_seq < 1:
        raise ValueError(f"next sequence must be >= 1, got {next_seq}")
    return {"stream": stream, "next": int(next_seq)}


def offset_next(offset: Mapping[str, Any] | str, stream: str) -> int:
    """The ``next`` sequence of an offset (dict or its JSON); checks it is for ``stream``."""
    if isinstance(offset, str):
        offset = json.loads(offset)
    assert not isinstance(offset, str)
    if offset.get("stream") != stream:
        raise OptionError(
            f"checkpointed offset is for stream {offset.get('stream')!r}, not {stream!r}"
        )
    n = int(offset["next"])
    if n < 1:
        raise ValueError(f"offset next must be >= 1, got {n}")
    return n


def clip_end(start_next: int, available_next: int, max_rows: int | None) -> int:
    """The end offset of the next micro-batch.

    Args:
        start_next: the batch's start (first sequence not yet read).
        available_next: ``last_seq + 1`` of the stream (or the ``AvailableNow`` target).
        max_rows: at most this many sequences per batch (None: no limit).

    Returns:
        ``end`` with ``start_next <= end <= available_next``; the batch is ``[start, end)``.
    """
    end = max(start_next, available_next)
    if max_rows is not None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        end = min(end, start_next + max_rows)
    return end


def check_data_loss(start_next: int, first_seq: int, last_seq: int) -> int | None:
    """The number of sequences lost below the stream's first, or None if nothing is lost.

    ``first_seq``/``last_seq`` are the stream's state.  Sequences ``[start_next, first_seq)``
    that were ever assigned (``<= last_seq``) are gone.  An empty new stream reports
    ``first_seq`` 0 (or 1) and loses nothing.
    """
    gone_to = min(first_seq, last_seq + 1)
    if start_next < gone_to:
        return gone_to - start_next
    return None


# -- ranges --------------------------------------------------------------------


@dataclass(frozen=True)
class SeqRange:
    """A half-open sequence range ``[first, end)``."""

    first: int
    end: int

    @property
    def last(self) -> int:
        return self.end - 1

    def __len__(self) -> int:
        return max(0, self.end - self.first)


def split_range(
    first: int,
    end: int,
    min_partitions: int = DEFAULT_MIN_PARTITIONS,
    max_per_partition: int = DEFAULT_MAX_PER_PARTITION,
) -> list[SeqRange]:
    """Cut ``[first, end)`` into contiguous sub-ranges (empty list for an empty range).

    The count is ``min(n, max(min_partitions, ceil(n / max_per_partition)))`` for ``n`` sequences;
    sizes differ by at most one, larger ranges first.
    """
    if min_partitions < 1 or max_per_partition < 1:
        raise ValueError("min_partitions and max_per_partition must be >= 1")
    n = end - first
    if n <= 0:
        return []
    k = min(n, max(min_partitions, math.ceil(n / max_per_partition)))
    size, extra = divmod(n, k)
    out: list[SeqRange] = []
    a = first
    for i in range(k):
        b = a + size + (1 if i < extra else 0)
        out.append(SeqRange(a, b))
        a = b
    return out


# -- option parsing ------------------------------------------------------------


def _get(opts: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive lookup (Spark's options are case-insensitive; plain dicts in tests)."""
    if name in opts:
        return opts[name]
    low = name.lower()
    for k, v in opts.items():
        if k.lower() == low:
            return v
    return None


def _int(opts: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = _get(opts, name)
    if raw is None or raw.strip() == "":
        return default
    try:
        v = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name}: not an integer: {raw!r}") from None
    if v < minimum:
        raise OptionError(f"option {name}: must be >= {minimum}, got {v}")
    return v


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(opts, name)
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name}: not a boolean: {raw!r}")


def parse_timestamp_ns(raw: str, name: str = "timestamp") -> int:
    """Epoch milliseconds (an integer) or ISO-8601 (naive means UTC) → epoch nanoseconds."""
    s = raw.strip()
    if s.lstrip("-").isdigit():
        return int(s) * 1_000_000
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise OptionError(f"option {name}: not epoch ms or ISO-8601: {raw!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    delta = dt - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _position(opts: Mapping[str, str], name: str) -> str | int | None:
    raw = _get(opts, name)
    if raw is None or raw.strip() == "":
        return None
    v = raw.strip().lower()
    if v in (EARLIEST, LATEST):
        return v
    try:
        n = int(v)
    except ValueError:
        raise OptionError(f"option {name}: earliest, latest or a sequence: {raw!r}") from None
    if n < 1:
        raise OptionError(f"option {name}: a sequence is >= 1, got {n}")
    return n


@dataclass(frozen=True)
class ConnectOptions:
    """How to reach the servers (shared by source and sink)."""

    servers: tuple[str, ...]
    user: str | None = None
    password: str | None = None
    token: str | None = None
    creds: str | None = None
    nkeys_seed: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_hostname: str | None = None
    js_domain: str | None = None
    js_api_prefix: str | None = None

    @classmethod
    def parse(cls, opts: Mapping[str, str]) -> ConnectOptions:
        raw = _get(opts, "servers")
        if raw is None or not raw.strip():
            raise OptionError("option servers is required (comma-separated nats:// URLs)")
        servers = tuple(s.strip() for s in raw.split(",") if s.strip())
        for s in servers:
            if "://" not in s:
                raise OptionError(f"option servers: {s!r} is not a URL (nats://host:port)")
        domain, prefix = _get(opts, "jsDomain"), _get(opts, "jsApiPrefix")
        if domain and prefix:
            raise OptionError("options jsDomain and jsApiPrefix are exclusive")
        return cls(
            servers=servers,
            user=_get(opts, "user"),
            password=_get(opts, "password"),
            token=_get(opts, "token"),
            creds=_get(opts, "creds"),
            nkeys_seed=_get(opts, "nkeysSeed"),
            tls_ca=_get(opts, "tlsCaFile"),
            tls_cert=_get(opts, "tlsCertFile"),
            tls_key=_get(opts, "tlsKeyFile"),
            tls_hostname=_get(opts, "tlsHostname"),
            js_domain=domain or None,
            js_api_prefix=prefix or None,
        )

    @property
    def api_prefix(self) -> str:
        """The JetStream API subject prefix (``$JS.API`` unless a domain or prefix is set)."""
        if self.js_api_prefix:
            return self.js_api_prefix.rstrip(".")
        if self.js_domain:
            return f"$JS.{self.js_domain}.API"
        return "$JS.API"


@dataclass(frozen=True)
class SourceOptions:
    """The source's options, validated."""

    conn: ConnectOptions
    stream: str
    filter_subjects: tuple[str, ...] = ()
    starting_sequence: str | int | None = None
    starting_timestamp_ns: int | None = None
    ending_sequence: str | int | None = None
    ending_timestamp_ns: int | None = None
    max_messages_per_trigger: int | None = None
    min_partitions: int = DEFAULT_MIN_PARTITIONS
    max_messages_per_partition: int = DEFAULT_MAX_PER_PARTITION
    fail_on_data_loss: bool = True
    include_headers: bool = True
    fetch_batch: int = DEFAULT_FETCH_BATCH
    fetch_timeout_ms: int = DEFAULT_FETCH_TIMEOUT_MS

    @classmethod
    def parse(cls, opts: Mapping[str, str]) -> SourceOptions:
        conn = ConnectOptions.parse(opts)
        stream = (_get(opts, "stream") or "").strip()
        if not stream:
            raise OptionError("option stream is required")
        if any(c in stream for c in " .*>\t"):
            raise OptionError(f"option stream: invalid stream name {stream!r}")
        subjects: list[str] = []
        for name in ("filterSubject", "filterSubjects"):
            raw = _get(opts, name)
            if raw:
                subjects += [s.strip() for s in raw.split(",") if s.strip()]
        ts = _get(opts, "startingTimestamp")
        te = _get(opts, "endingTimestamp")
        ending = _position(opts, "endingSequence")
        if ending == EARLIEST:
            raise OptionError("option endingSequence: latest or a sequence")
        return cls(
            conn=conn,
            stream=stream,
            filter_subjects=tuple(dict.fromkeys(subjects)),
            starting_sequence=_position(opts, "startingSequence"),
            starting_timestamp_ns=parse_timestamp_ns(ts, "startingTimestamp") if ts else None,
            ending_sequence=ending,
            ending_timestamp_ns=parse_timestamp_ns(te, "endingTimestamp") if te else None,
            max_messages_per_trigger=_int(opts, "maxMessagesPerTrigger", None, 1),
            min_partitions=_int(opts, "minPartitions", DEFAULT_MIN_PARTITIONS, 1) or 1,
            max_messages_per_partition=_int(
                opts, "maxMessagesPerPartition", DEFAULT_MAX_PER_PARTITION, 1
            )
            or 1,
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            include_headers=_bool(opts, "includeHeaders", True),
            fetch_batch=_int(opts, "fetchBatch", DEFAULT_FETCH_BATCH, 1) or 1,
            fetch_timeout_ms=_int(opts, "fetchTimeoutMs", DEFAULT_FETCH_TIMEOUT_MS, 1) or 1,
        )


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options, validated."""

    conn: ConnectOptions
    subject: str | None = None
    msg_id: str = "auto"
    msg_id_prefix: str = ""
    expected_stream: str | None = None
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    timeout_ms: int = DEFAULT_PUBLISH_TIMEOUT_MS

    @classmethod
    def parse(cls, opts: Mapping[str, str]) -> SinkOptions:
        mode = (_get(opts, "msgId") or "auto").strip().lower()
        if mode not in MSG_ID_MODES:
            raise OptionError(f"option msgId: one of {', '.join(MSG_ID_MODES)}, got {mode!r}")
        subject = _get(opts, "subject")
        if subject is not None and (not subject.strip() or any(c in subject for c in " *>")):
            raise OptionError(f"option subject: not a publish subject: {subject!r}")
        return cls(
            conn=ConnectOptions.parse(opts),
            subject=subject.strip() if subject else None,
            msg_id=mode,
            msg_id_prefix=_get(opts, "msgIdPrefix") or "",
            expected_stream=_get(opts, "expectedStream") or None,
            max_inflight=_int(opts, "maxInflight", DEFAULT_MAX_INFLIGHT, 1) or 1,
            timeout_ms=_int(opts, "timeoutMs", DEFAULT_PUBLISH_TIMEOUT_MS, 1) or 1,
        )


# -- message ids ---------------------------------------------------------------


def hash_msg_id(
    subject: str, data: bytes, headers: Mapping[str, Sequence[str]] | None = None, prefix: str = ""
) -> str:
    """A deterministic id from the row's content: sha256 over subject, sorted headers, payload.

    Two rows with identical subject, headers and payload get the same id — inside the stream's
    duplicate window the second is dropped.  Use a ``msg_id`` column when such rows are distinct.
    ``Nats-Msg-Id`` itself is left out of the hash.
    """
    h = hashlib.sha256()
    h.update(subject.encode())
    h.update(b"\0")
    for k in sorted(headers or {}):
        if k == "Nats-Msg-Id":
            continue
        for v in (headers or {})[k]:
            h.update(k.encode() + b"\x01" + v.encode() + b"\x02")
    h.update(b"\0")
    h.update(data)
    return prefix + h.hexdigest()[:32]


def row_msg_id(
    mode: str,
    subject: str,
    data: bytes,
    headers: Mapping[str, Sequence[str]] | None,
    column_value: str | None,
    prefix: str = "",
) -> str | None:
    """The ``Nats-Msg-Id`` for one row under ``mode`` (see ``SinkOptions.msg_id``).

    ``auto``: the ``msg_id`` column when the row has one, else a header ``Nats-Msg-Id``,
    else the content hash.  ``column``: the column (an error when null).  ``hash``: the hash.
    ``none``: no id (no dedupe; re-runs publish again).
    """
    if mode == "none":
        return None
    if mode in ("auto", "column") and column_value:
        return prefix + column_value
    if mode == "column":
        raise OptionError("msgId=column but a row has no msg_id value")
    if mode == "auto" and headers and headers.get("Nats-Msg-Id"):
        return prefix + headers["Nats-Msg-Id"][-1]
    return hash_msg_id(subject, data, headers, prefix)


def normalize_headers(raw: Any) -> dict[str, list[str]]:
    """Headers from a row: a map (or list of pairs) of string → string or list of strings
    (None → {}); every value of a repeated name is kept, in order."""
    if not raw:
        return {}
    items = raw.items() if hasattr(raw, "items") else raw
    out: dict[str, list[str]] = {}
    for k, v in items:
        if v is None:
            continue
        if isinstance(v, str | bytes):
            v = [v]
        out.setdefault(str(k), []).extend(
            x.decode() if isinstance(x, bytes) else str(x) for x in v if x is not None
        )
    return out
