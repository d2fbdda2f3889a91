"""The JetStream account's limits (``accounts { APP: { jetstream: { max_mem: 1G, … } } }``).

Theory of operation: nats-server checks an account's JetStream limits beside the server's
(``node.jetstream.resources``), with these answers (observed on 2.15.1):

* STREAM.CREATE past ``max_streams`` streams: 400/10027 ``maximum number of streams reached``
  (checked first), then the account's reservations: a stream's ``max_bytes`` (1 byte when it
  has none) beside the other streams' ``max_bytes`` of its storage type must fit under
  ``max_mem``/``max_file``: else 500/10028 (memory) or 500/10047 (file).  An update checks
  the growth of its ``max_bytes``.  In a cluster every reservation counts once per replica
  (an R3 stream of ``max_bytes`` 4M reserves 12M of the account's ``max_file``), as the
  reference's meta leader counts them (observed on a three-node 2.15.1 cluster).
* CONSUMER.CREATE of a new consumer on a stream that already has ``max_consumers``:
  400/10026 ``maximum consumers limit reached`` (the limit is per stream, as nats-server's).
* A publish whose message would take the account's stored bytes of its storage type past
  the limit: PubAck 400/10002 ``resource limits exceeded for account``, not stored (message
  size as the store accounts it).
A limit of 0 or below (``max_streams``, ``max_consumers``) or -1 (bytes) is no limit.

The checks run where the requests are decided (the single server, or the meta leader for
stream creates; the stream leader for publishes) against the state seen there; concurrent
creates racing past ``max_streams`` in a cluster are not excluded (nats-server's meta leader
has the same window).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cluster.model import Storage, StreamConfig
from node.jsapi.errors import (
    MAXIMUM_CONSUMERS_LIMIT,
    MAXIMUM_STREAMS_LIMIT,
    MEMORY_RESOURCES_EXCEEDED,
    STORAGE_RESOURCES_EXCEEDED,
    JSApiError,
)
from store.limits import Accounting, msg_size_raw

ACCOUNT_LIMIT_PUB_ERROR = (400, 10002, "resource limits exceeded for account")
"""The PubAck error of a publish refused for the account's stored bytes."""


@dataclass(frozen=True)
class AccountLimits:
    """One account's JetStream limits (-1: none)."""

    max_memory: int = -1
    max_storage: int = -1
    max_streams: int = -1
    max_consumers: int = -1
    max_ack_pending: int = -1

    @classmethod
    def from_config(cls, limits: dict[str, int]) -> AccountLimits:
        return cls(**{k: int(v) for k, v in limits.items() if k in cls.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        """JetStreamAccountLimits in nats-server's field order (``$JS.API.INFO``)."""
        return {
            "max_memory": self.max_memory,
            "max_storage": self.max_storage,
            "max_streams": self.max_streams,
            "max_consumers": self.max_consumers,
            "max_ack_pending": self.max_ack_pending,
            "memory_max_stream_bytes": -1,
            "storage_max_stream_bytes": -1,
            "max_bytes_required": False,
        }

    def _limit(self, storage: Storage) -> int:
        return self.max_memory if storage is Storage.MEMORY else self.max_storage

    def check_create(
        self, cfg: StreamConfig, existing: Iterable[StreamConfig], *, replicated: bool = False
    ) -> None:
        """Whether the account may add stream ``cfg`` beside ``existing``
        (``replicated``: in a cluster, where reservations count per replica).

        Raises:
            JSApiError: 10027, then 10028 (memory) or 10047 (file).
        """
        others = [c for c in existing if c.name != cfg.name]
        if self.max_streams > 0 and len(others) >= self.max_streams:
            raise JSApiError(MAXIMUM_STREAMS_LIMIT)
        add = (cfg.max_bytes if cfg.max_bytes > 0 else 1) * _copies(cfg, replicated)
        self._check_bytes(cfg.storage, add, others, replicated)

    def check_update(
        self,
        old: StreamConfig,
        new: StreamConfig,
        existing: Iterable[StreamConfig],
        *,
        replicated: bool = False,
    ) -> None:
        """Whether stream ``old`` may become ``new`` within the account's reservations.

        Raises:
            JSApiError: 10028 (memory) or 10047 (file).
        """
        grow = max(new.max_bytes, 0) * _copies(new, replicated) - max(old.max_bytes, 0) * _copies(
            old, replicated
        )
        if grow > 0:
            self._check_bytes(new.storage, grow, existing, replicated)

    def _check_bytes(
        self, storage: Storage, add: int, configs: Iterable[StreamConfig], replicated: bool
    ) -> None:
        limit = self._limit(storage)
        if limit < 0:
            return
        reserved = sum(
            c.max_bytes * _copies(c, replicated)
            for c in configs
            if c.storage is storage and c.max_bytes > 0
        )
        if reserved + add > limit:
            if storage is Storage.MEMORY:
                raise JSApiError(MEMORY_RESOURCES_EXCEEDED)
            raise JSApiError(STORAGE_RESOURCES_EXCEEDED)

    def check_consumer(self, count: int) -> None:
        """Whether a stream holding ``count`` consumers may get one more.

        Raises:
            JSApiError: 10026.
        """
        if self.max_consumers > 0 and count >= self.max_consumers:
            raise JSApiError(MAXIMUM_CONSUMERS_LIMIT)

    def publish_exceeds(
        self, storage: Storage, used: int, subject: bytes, hdr: bytes | None, payload: bytes
    ) -> bool:
        """Whether storing this message would take ``used`` bytes past the limit."""
        limit = self._limit(storage)
        if limit < 0:
            return False
        acct = Accounting.MEMORY if storage is Storage.MEMORY else Accounting.FILE
        size = msg_size_raw(len(subject), len(hdr or b""), len(payload), acct)
        return used + size > limit


def _copies(cfg: StreamConfig, replicated: bool) -> int:
    """How many times a stream's reservation counts (its replicas, in a cluster)."""
    return max(cfg.num_replicas, 1) if replicated else 1
