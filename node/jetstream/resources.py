"""The server's JetStream storage limits: reservations at create/update, usage at publish.

Theory of operation
-------------------
``jetstream { max_memory_store, max_file_store }`` (or, unconfigured,
nats-server's dynamic defaults: 75% of the memory, 75% of the free disk at
start) bound what this server stores, per storage type.  nats-server checks
them in two places, and so does this module -- both are node-level resource
checks made before anything is proposed, not replicated state:

* **Reservations** (STREAM.CREATE, STREAM.UPDATE): a stream's ``max_bytes``
  is reserved for it.  A create needs ``max_bytes`` (1 byte when the stream
  has none) to fit under the limit beside what the other streams of that
  storage type reserve; an update needs the growth of its ``max_bytes``
  (nothing when it shrinks or stays) to fit beside every reservation, its
  own old one included.  Failing: 500/10047 ``insufficient storage resources
  available`` (file) or 500/10028 ``insufficient memory resources
  available`` (memory).  Observed on 2.15.1 with 1 MB: 600000 + 448576 is
  accepted, 600000 + 448577 is not; a stream without ``max_bytes`` cannot
  be created once the reservations fill the limit.
* **Usage** (each captured publish): once the bytes stored in all streams
  of a storage type are *above* the limit, a publish to any stream of that
  type is refused with 503/10023 ``insufficient resources`` (PubAck
  ``{"error":…,"stream":…,"seq":0}``) and not stored.  Observed: 1 MB and
  100 KiB messages -- the 11th is stored (10 stored < 1 MB), the 12th is
  refused (11 stored > 1 MB); a purge makes room again.

Usage is the sum of the streams' ``state().bytes`` (nats-server's message
size accounting), kept per stream and refreshed by a listener after every
op a stream applies, so the publish check is one dict lookup.  It sees the
usage of applied batches: publishes already queued behind a batch that
crosses the limit are still stored (nats-server, checking per message,
stops at the first) -- an overshoot of at most one batch.

The server's limits count every account's streams (tracked per account and
name); each account's own limits (``accounts { APP: { jetstream: {max_mem,
…} } }``, ``node.jetstream.acclimits``) are checked beside these against that
account's usage (``AccountStorage.used``).
"""

from __future__ import annotations

from collections.abc import Iterable

from cluster.model import Storage, StreamConfig
from cluster.streams import Stream
from node.jsapi.errors import (
    MEMORY_RESOURCES_EXCEEDED,
    STORAGE_RESOURCES_EXCEEDED,
    JSApiError,
)

__all__ = ["INSUFFICIENT_RESOURCES", "AccountStorage", "StorageLimits", "reserved"]

INSUFFICIENT_RESOURCES = (503, 10023, "insufficient resources")
"""The PubAck error of a publish refused for the server's storage usage."""


class StorageLimits:
    """Reservation checks and stored-bytes tracking against the server's limits.

    Streams are tracked per ``(account, name)``: the server's limits see every
    account's bytes, ``used_by(account)`` one account's (for its own limits).

    Args:
        max_memory: bytes ``storage: memory`` streams may reserve and use.
        max_storage: the same for ``storage: file`` streams.
    """

    def __init__(self, max_memory: int, max_storage: int) -> None:
        self.max = {Storage.MEMORY: max_memory, Storage.FILE: max_storage}
        self.used = {Storage.MEMORY: 0, Storage.FILE: 0}
        self._streams: dict[tuple[str, str], tuple[Stream, int]] = {}
        self._accounts: dict[str, dict[Storage, int]] = {}

    # -- reservations ----------------------------------------------------------------

    def check_create(
        self, cfg: StreamConfig, existing: Iterable[StreamConfig], account: str = ""
    ) -> None:
        """Whether a new stream ``cfg`` fits beside ``existing``' reservations
        (``account``'s streams) and those of the other accounts' streams.

        Raises:
            JSApiError: 10047 (file) or 10028 (memory).
        """
        add = cfg.max_bytes if cfg.max_bytes > 0 else 1
        held = reserved(cfg.storage, existing) + self._reserved_except(account, cfg.storage)
        self._check(cfg.storage, add, held)

    def check_update(
        self,
        old: StreamConfig,
        new: StreamConfig,
        existing: Iterable[StreamConfig],
        account: str = "",
    ) -> None:
        """Whether stream ``old`` may become ``new`` (``existing`` holds ``old``).

        Raises:
            JSApiError: 10047 (file) or 10028 (memory).
        """
        grow = max(new.max_bytes, 0) - max(old.max_bytes, 0)
        held = reserved(new.storage, existing) + self._reserved_except(account, new.storage)
        self._check(new.storage, max(grow, 0), held)

    def _reserved_except(self, account: str, storage: Storage) -> int:
        return reserved(
            storage, (s.cfg for (a, _), (s, _n) in self._streams.items() if a != account)
        )

    def _check(self, storage: Storage, add: int, reserved: int) -> None:
        limit = self.max[storage]
        if reserved > limit or add > limit - reserved:
            if storage is Storage.MEMORY:
                raise JSApiError(MEMORY_RESOURCES_EXCEEDED)
            raise JSApiError(STORAGE_RESOURCES_EXCEEDED)

    # -- usage -----------------------------------------------------------------------

    def track(self, stream: Stream, account: str = "") -> None:
        """Count ``stream``'s stored bytes now and after every op it applies."""
        key = (account, stream.cfg.name)
        storage = stream.cfg.storage
        streams = self._streams
        used = self.used

        def observe(_outcome: object) -> None:
            # after every applied op (each publish batch): only the change counts
            entry = streams.get(key)
            if entry is None or entry[0] is not stream:
                return
            nbytes = stream.store.stored_bytes()
            delta = nbytes - entry[1]
            if delta:
                streams[key] = (stream, nbytes)
                used[storage] += delta
                self._accounts[account][storage] += delta

        self._set(key, stream)
        stream.listeners.append(observe)

    def forget(self, name: str, account: str = "") -> None:
        """Stream ``name`` is gone: its bytes no longer count."""
        old = self._streams.pop((account, name), None)
        if old is not None:
            storage = old[0].cfg.storage
            self.used[storage] -= old[1]
            self._accounts[account][storage] -= old[1]

    def _set(self, key: tuple[str, str], stream: Stream) -> None:
        self.forget(key[1], key[0])
        nbytes = stream.store.state().bytes
        self._streams[key] = (stream, nbytes)
        self.used[stream.cfg.storage] += nbytes
        acc = self._accounts.setdefault(key[0], {Storage.MEMORY: 0, Storage.FILE: 0})
        acc[stream.cfg.storage] += nbytes

    def used_by(self, account: str = "") -> dict[Storage, int]:
        """``account``'s stored bytes by storage type (a live mapping)."""
        return self._accounts.setdefault(account, {Storage.MEMORY: 0, Storage.FILE: 0})

    def exceeded(self, storage: Storage) -> bool:
        """The stored bytes of ``storage`` are above the limit (publishes refused)."""
        return self.used[storage] > self.max[storage]


def reserved(storage: Storage, configs: Iterable[StreamConfig]) -> int:
    """What the streams ``configs`` reserve of ``storage`` (their ``max_bytes``)."""
    return sum(c.max_bytes for c in configs if c.storage is storage and c.max_bytes > 0)


class AccountStorage:
    """One account's view of the server's ``StorageLimits``: the interface a
    JetStream service uses, with the account filled in; ``used`` is the
    account's usage (its ``max_mem``/``max_file``), ``exceeded`` the server's.

    Args:
        server: the server's limits and usage, shared by the accounts.
        account: the account's name.
    """

    def __init__(self, server: StorageLimits, account: str) -> None:
        self.server = server
        self.account = account
        #: the account's stored bytes by storage type (live)
        self.used = server.used_by(account)

    def check_create(self, cfg: StreamConfig, existing: Iterable[StreamConfig]) -> None:
        """``StorageLimits.check_create`` for this account."""
        self.server.check_create(cfg, existing, self.account)

    def check_update(
        self, old: StreamConfig, new: StreamConfig, existing: Iterable[StreamConfig]
    ) -> None:
        """``StorageLimits.check_update`` for this account."""
        self.server.check_update(old, new, existing, self.account)

    def track(self, stream: Stream) -> None:
        """``StorageLimits.track`` for this account."""
        self.server.track(stream, self.account)

    def forget(self, name: str) -> None:
        """``StorageLimits.forget`` for this account."""
        self.server.forget(name, self.account)

    def exceeded(self, storage: Storage) -> bool:
        """The server's stored bytes of ``storage`` are above its limit."""
        return self.server.exceeded(storage)
