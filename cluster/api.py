"""The facade ``node/`` calls for JetStream: streams, messages, publishes.

Theory of operation: ``node/`` never touches a stream's store, state machine
or group directly for a change; it asks this facade, which routes the request
to the stream's group (``LocalGroup`` for R1 today, a ``RaftGroup`` when the
stream is replicated) and returns the state machine's result.  Reads
(``get_msg``, ``state``) go to the local store: on R1 it is the leader's.
Everything that decides (sequence, dedupe, limits, deny_delete, sealed, …)
happens in ``apply`` (DESIGN rule 2); this module only routes and persists
configs.

Results are the state machine's result types (``PubResult``,
``ApiErrorResult``, ``PurgeResult``, ``DeleteResult``, ``PolicyResult``);
``node/jsapi`` turns them into JSON.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from cluster.api_origin import ApiOrigin, Messaging
from cluster.model import ExternalStream, StreamConfig
from cluster.quarantine import Quarantined
from cluster.replica_spec import ReplicaSpec
from cluster.sourcing import Feed, Origin, Sourcing
from cluster.stream_archive import Archive, ArchivedConsumer
from cluster.stream_fsm import ApplyOutcome
from cluster.stream_registry import StreamExists, StreamRegistry
from cluster.streams import OnResult, Stream
from store.api import StoredMsg, StreamState
from store.errors import MsgNotFound

log = logging.getLogger(__name__)

#: stores opened at once when a server starts
RECOVER_PARALLEL = 4

__all__ = ["JetStreamApi", "MsgNotFound", "StreamExists", "StreamNotFound", "StreamSnapshot"]


class StreamNotFound(KeyError):
    """No stream by that name."""


@dataclass(frozen=True, slots=True)
class StreamSnapshot:
    """A stream captured at one applied point (``snapshot_stream``).

    Attributes:
        archive: config, creation time, the state machine's document and
            the consumers given.
        state: the store's state at that point.
    """

    archive: Archive
    state: StreamState


class JetStreamApi:
    """Streams of this node.

    Args:
        store_dir: the JetStream directory; None keeps everything in memory.
        nursery: where the streams' tasks run.
        domain: this server's JetStream domain ("" if none).
        messaging: core NATS inside the server, for mirrors and sources in
            other domains (read through consumers created over their API);
            None leaves those idle.
    """

    def __init__(
        self,
        store_dir: str | None,
        nursery: trio.Nursery,
        *,
        domain: str = "",
        messaging: Messaging | None = None,
    ) -> None:
        self._registry = StreamRegistry(store_dir, nursery)
        remote = None
        if messaging is not None:
            bus = messaging

            def remote(feed: Feed) -> Origin:
                src = feed.src
                if src.external is None:  # same domain, another server of the cluster
                    api = f"$JS.{domain}.API" if domain else "$JS.API"
                    src = dataclasses.replace(src, external=ExternalStream(api=api))
                return ApiOrigin(
                    bus,
                    src,
                    target=feed.target.cfg.name,
                    mirror=feed.mirror,
                    domain=domain,
                    identity=feed.identity,
                )

        #: the feeds of mirrors and sourcing streams (started with each stream)
        self.sourcing = Sourcing(self._registry.streams, nursery, domain=domain, remote=remote)
        #: where long-running transfers (snapshot delivery, restore intake) run
        self.nursery = nursery
        #: called as ``on_created(stream)`` when a stream starts (also at recovery)
        self.on_stream_started: list[Callable[[Stream], None]] = [self._feeds]

    def _feeds(self, stream: Stream) -> None:
        """Start a stream's mirror and source feeds: at once for R1, while it
        leads for a replicated stream (the leader alone copies)."""
        rg = stream.replicated
        if rg is None:
            self.sourcing.stream_started(stream)
            return

        def leadership(lead: bool) -> None:
            if stream.cfg.name not in self._registry.streams:
                return
            if lead:
                self.sourcing.stream_started(stream)
            else:
                self.sourcing.stream_stopped(stream.cfg.name)

        rg.leader_listeners.append(leadership)
        if rg.is_leader:
            self.sourcing.stream_started(stream)

    # -- streams ------------------------------------------------------------------

    @property
    def streams(self) -> Mapping[str, Stream]:
        """Streams by name (read only)."""
        return self._registry.streams

    def stream(self, name: str) -> Stream:
        """The stream ``name``.

        Raises:
            StreamNotFound.
        """
        s = self._registry.streams.get(name)
        if s is None:
            raise StreamNotFound(name)
        return s

    def configs(self) -> dict[str, StreamConfig]:
        """Every stream's config by name."""
        return {n: s.cfg for n, s in self._registry.streams.items()}

    def set_sync_interval(self, interval_s: float | None) -> None:
        """File stores opened from now on: None syncs each batch before its
        results (the default); seconds syncs on that timer instead (the
        user's ``sync_interval``).  Call before ``recover``."""
        self._registry.sync_interval_s = interval_s

    async def recover(self) -> list[Stream]:
        """Reopen the streams saved on disk (at start).

        Stores open ``RECOVER_PARALLEL`` at a time (their work is file I/O in
        threads); the started callbacks then run in name order, as before.
        """
        saved = await trio.to_thread.run_sync(self._registry.saved)
        opened: list[Stream | None] = [None] * len(saved)
        limiter = trio.CapacityLimiter(RECOVER_PARALLEL)

        async def open_one(i: int, cfg: StreamConfig, created_ns: int) -> None:
            async with limiter:
                try:
                    opened[i] = await self._registry.create(cfg, created_ns)
                except Exception as exc:  # its store will not open: set it aside
                    log.exception("event=stream_recover_failed stream=%s", cfg.name)
                    reg = self._registry
                    if reg.dir is not None:
                        d = reg.dir / "streams" / cfg.name
                        why = f"{d}: {type(exc).__name__}: {exc}"
                        await trio.to_thread.run_sync(reg.quarantine_dir, d, why)

        async with trio.open_nursery() as nursery:
            for i, (cfg, created_ns) in enumerate(saved):
                nursery.start_soon(open_one, i, cfg, created_ns)
        out = []
        for stream in opened:
            if stream is None:
                continue
            for cb in self.on_stream_started:
                cb(stream)
            out.append(stream)
        return out

    def quarantined(self) -> list[Quarantined]:
        """Stream and consumer directories set aside because they could not
        be recovered (this start or earlier); blocking file I/O, small."""
        return self._registry.quarantined()

    async def create_stream(
        self,
        cfg: StreamConfig,
        created_ns: int | None = None,
        *,
        replica: ReplicaSpec | None = None,
    ) -> Stream:
        """Create a new stream (config already validated by the caller).

        Args:
            cfg: its config.
            created_ns: its creation time (None: now; a cluster passes the
                time its meta assignment carries).
            replica: this server's place in the stream's Raft group (R2/R3);
                None for R1.
        """
        return await self._start(cfg, created_ns, fresh=True, replica=replica)

    async def open_stream(
        self, cfg: StreamConfig, created_ns: int, *, replica: ReplicaSpec | None = None
    ) -> Stream:
        """Reopen stream ``cfg`` from its data on disk (its consumers are the
        caller's)."""
        return await self._start(cfg, created_ns, fresh=False, replica=replica)

    async def regroup_stream(self, cfg: StreamConfig, replica: ReplicaSpec) -> Stream:
        """Run R1 stream ``cfg.name`` as a replicated group over its store
        (``StreamRegistry.regroup``); its feeds and listeners start afresh."""
        self.stream(cfg.name)
        self.sourcing.stream_deleted(cfg.name)
        stream = await self._registry.regroup(cfg, replica)
        for cb in self.on_stream_started:
            cb(stream)
        return stream

    def raft_dir(self, name: str) -> Path | None:
        """Where stream ``name``'s group keeps its journal (None: no directory)."""
        return self._registry.raft_dir(name)

    async def saved_stream(self, name: str) -> tuple[StreamConfig, int] | None:
        """``(config, created_ns)`` of stream ``name``'s data on disk, if any.

        Raises:
            cluster.stream_registry.SavedConfigDamaged: its config file cannot be read.
        """
        return await trio.to_thread.run_sync(self._registry.saved_one, name)

    async def quarantine(self, name: str) -> str:
        """Move stream ``name``'s data aside (kept, never deleted); its new path."""
        return await trio.to_thread.run_sync(self._registry.quarantine, name)

    async def _start(
        self,
        cfg: StreamConfig,
        created_ns: int | None,
        *,
        fresh: bool | None = None,
        replica: ReplicaSpec | None = None,
    ) -> Stream:
        stream = await self._registry.create(cfg, created_ns, fresh=fresh, replica=replica)
        for cb in self.on_stream_started:
            cb(stream)
        return stream

    async def update_stream(self, cfg: StreamConfig) -> Any:
        """Replace a stream's config (validated by the caller); the policy
        change goes through the group.  Returns the ``PolicyResult``.

        Raises:
            StreamNotFound.
        """
        self.stream(cfg.name)
        result = await self._registry.update(cfg)
        self.sourcing.stream_updated(self.stream(cfg.name))
        return result

    async def adopt_config(self, cfg: StreamConfig) -> None:
        """A replica that does not lead takes a stream's new config (its
        leader proposes the policy through the stream's log)."""
        await self._registry.adopt(cfg)

    async def delete_stream(self, name: str) -> None:
        """Stop a stream and remove its data.

        Raises:
            StreamNotFound.
        """
        self.stream(name)
        self.sourcing.stream_deleted(name)
        await self._registry.delete(name)

    async def snapshot_stream(
        self, name: str, consumers: Sequence[ArchivedConsumer] = ()
    ) -> StreamSnapshot:
        """Capture stream ``name`` at one applied point (publishing goes on).

        Args:
            name: the stream.
            consumers: its consumers as the archive should carry them
                (captured by the caller, which owns them, just before).

        Raises:
            StreamNotFound; StoreError, OSError when the store cannot be read.
        """
        stream = self.stream(name)
        document, state = await stream.snapshot()
        archive = Archive(stream.cfg, stream.created_ns, document, tuple(consumers))
        return StreamSnapshot(archive, state)

    async def restore_stream(self, cfg: StreamConfig, archive: Archive) -> Stream:
        """Create stream ``cfg`` (validated by the caller) from ``archive``, as
        created now; ``cfg`` is its identity from now on (a policy that differs from the
        archived one is applied through the group after the restore).

        Raises:
            StreamExists: the name is taken, or being created or restored.
            StreamSnapshotError: the archive's document is malformed.
            StoreError, OSError: the store failed.
            In every case nothing is created.
        """
        # ``created`` is the restore's time, as nats-server shows it (the
        # archive keeps the original for the record)
        stream = await self._registry.restore(cfg, time.time_ns(), archive.document)
        for cb in self.on_stream_started:
            cb(stream)
        return stream

    # -- messages -------------------------------------------------------------

    def publish(
        self,
        name: str,
        subject: str,
        headers: bytes | None,
        payload: bytes,
        on_result: OnResult | None,
    ) -> bool:
        """Queue a captured message for stream ``name``; ``on_result`` gets its
        ``PubResult``/``ApiErrorResult`` once applied and durable.  False when
        the stream's queue is full (nothing stored).

        Raises:
            StreamNotFound.
        """
        return self.stream(name).offer(subject, headers, payload, on_result)

    async def purge(self, name: str, filter: str | None, seq: int | None, keep: int | None) -> Any:
        """Purge (all, by subject filter, up to ``seq``, or keeping ``keep``)."""
        return await self.stream(name).purge(filter, seq, keep)

    async def delete_msg(self, name: str, seq: int, *, erase: bool) -> Any:
        """Delete message ``seq``; ``erase`` overwrites it on disk."""
        return await self.stream(name).delete_msg(seq, erase=erase)

    def get_msg(
        self,
        name: str,
        *,
        seq: int = 0,
        last_by_subj: str = "",
        next_by_subj: str = "",
    ) -> StoredMsg:
        """Read one message: by ``seq``; the last on ``last_by_subj``; or the
        first at or after ``seq`` on ``next_by_subj``.

        Raises:
            StreamNotFound; MsgNotFound when there is no such message.
        """
        store = self.stream(name).store
        if last_by_subj:
            return store.load_last(last_by_subj)
        if next_by_subj:
            m = store.load_next(next_by_subj, max(seq, 1))
            if m is None:
                raise MsgNotFound(next_by_subj)
            return m
        return store.load(seq)

    def listen(self, name: str, listener: Callable[[ApplyOutcome], None]) -> None:
        """Call ``listener(outcome)`` after every op applied to stream ``name``."""
        self.stream(name).listeners.append(listener)
