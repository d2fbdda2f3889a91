"""The node's consumers: creating, recovering, updating and removing them.

Theory of operation: ``ConsumerRegistry`` owns every ``Consumer`` shell
(``cluster/consumers.py``) of the node, keyed by stream and name, runs their
tasks in its nursery (a failing consumer logs and stops; the server goes on),
and persists what outlives a restart: a consumer of a file stream keeps its
config (``config.json``, write-fsync-rename) and its state (a
``FileConsumerStore``) under the stream's directory; memory streams and
``mem_storage`` consumers keep both in memory.  It also keeps each stream's
``Retention`` (interest/workqueue removals) and seeds restored consumers
with their archived state.

Consumers of a replicated stream are not created here but by their stream's
log (``cluster.consumer_table``): ``adopt`` wraps a table entry in a shell
(nothing written: the journal holds their state) and ``drop`` stops it once
the table removed it; both are synchronous (called from apply listeners).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

import trio

from cluster.consumer_link import StreamGroupLink
from cluster.consumer_model import ConsumerConfig
from cluster.consumers import Consumer
from cluster.model import Retention as RetentionPolicy
from cluster.model import Storage
from cluster.quarantine import Quarantine
from cluster.retention import Retention
from cluster.streams import Stream
from store.api import ConsumerState, ConsumerStore
from store.consumer import FileConsumerStore
from store.memory import MemoryConsumerStore

log = logging.getLogger(__name__)


class ConsumerRegistry:
    """The node's consumers, persisted next to their streams.

    A consumer of a file stream keeps its config in
    ``<store_dir>/streams/<stream>/consumers/<name>/config.json`` (written
    with write-fsync-rename, like stream configs) and its state in a
    ``FileConsumerStore`` in the same directory; memory streams and
    ``mem_storage`` consumers keep both in memory.

    Args:
        store_dir: the JetStream directory (None: everything in memory).
        nursery: where consumer tasks run.
    """

    def __init__(self, store_dir: str | None, nursery: trio.Nursery) -> None:
        self.dir = Path(store_dir) if store_dir else None
        self.nursery = nursery
        self.consumers: dict[str, dict[str, Consumer]] = {}
        self._scopes: dict[tuple[str, str], trio.CancelScope] = {}
        self.retentions: dict[str, Retention] = {}
        #: states waiting for the next ``create`` of that consumer (``seed``)
        self._seeds: dict[tuple[str, str], ConsumerState] = {}

    def seed(self, stream: str, name: str, state: ConsumerState | None) -> None:
        """The next ``create`` of consumer ``name`` on ``stream`` starts from
        ``state`` (a restored archive's) instead of choosing its start;
        None forgets a seed not taken."""
        if state is None:
            self._seeds.pop((stream, name), None)
        else:
            self._seeds[(stream, name)] = state

    def _dir(self, stream: str, name: str) -> Path | None:
        if self.dir is None:
            return None
        return self.dir / "streams" / stream / "consumers" / name

    def _durable(self, stream: Stream, cfg: ConsumerConfig) -> bool:
        return self.dir is not None and stream.cfg.storage is Storage.FILE and not cfg.mem_storage

    def of(self, stream: str) -> dict[str, Consumer]:
        """The consumers of ``stream`` by name (live dict; do not mutate)."""
        return self.consumers.get(stream, {})

    def retention(self, stream: Stream) -> Retention | None:
        """The retention keeper of a workqueue/interest stream (None for limits)."""
        name = stream.cfg.name
        if stream.cfg.retention is RetentionPolicy.LIMITS:
            self.retentions.pop(name, None)
            return None
        r = self.retentions.get(name)
        if r is None or r.stream is not stream:
            r = self.retentions[name] = Retention(stream, lambda: self.of(name).values())
        return r

    async def create(
        self, stream: Stream, name: str, cfg: ConsumerConfig, created_ns: int | None = None
    ) -> Consumer:
        """Create (or reopen at recovery) a consumer and start its task."""
        d = self._dir(stream.cfg.name, name)
        store: ConsumerStore
        seeded = self._seeds.pop((stream.cfg.name, name), None)
        fresh = created_ns is None or seeded is not None
        created = time.time_ns() if created_ns is None else created_ns
        if d is not None and self._durable(stream, cfg):
            if fresh:
                await trio.to_thread.run_sync(lambda: shutil.rmtree(d, ignore_errors=True))
            store = await trio.to_thread.run_sync(FileConsumerStore, d)
            if seeded is not None:
                store.save(seeded)
                await trio.to_thread.run_sync(store.sync)
            await trio.to_thread.run_sync(_write_json, d / "config.json", cfg, created)
        else:
            store = MemoryConsumerStore()
            if seeded is not None:
                store.save(seeded)
        consumer = Consumer(stream, name, cfg, store, created)
        consumer.restored = seeded is not None
        scope = trio.CancelScope()
        self._scopes[(stream.cfg.name, name)] = scope

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                try:
                    await consumer.run(task_status=task_status)
                except Exception:
                    # One consumer's failure must not take the server down: it
                    # stops (its state stays on disk) and the log says why.
                    log.exception(
                        "event=consumer_task_failed stream=%s consumer=%s",
                        stream.cfg.name,
                        name,
                    )

        consumer.retention = self.retention(stream)
        await self.nursery.start(run)
        self.consumers.setdefault(stream.cfg.name, {})[name] = consumer
        if consumer.retention is not None:
            await consumer.retention.refresh_interest()
        return consumer

    def _spawn(self, stream: Stream, consumer: Consumer) -> None:
        scope = trio.CancelScope()
        self._scopes[(stream.cfg.name, consumer.name)] = scope

        async def run() -> None:
            with scope:
                try:
                    await consumer.run()
                except Exception:
                    log.exception(
                        "event=consumer_task_failed stream=%s consumer=%s",
                        stream.cfg.name,
                        consumer.name,
                    )

        self.nursery.start_soon(run)

    def adopt(self, stream: Stream, name: str) -> Consumer | None:
        """The shell of consumer ``name`` of replicated ``stream`` (made and
        started if new, from the stream's consumer table); None if the table
        does not hold it."""
        rg = stream.replicated
        assert rg is not None
        entry = rg.rfsm.consumers.entries.get(name)
        if entry is None:
            return None
        have = self.consumers.get(stream.cfg.name, {}).get(name)
        if have is not None and have.fsm is entry.fsm:
            have.cfg = entry.cfg
            return have
        if have is not None:  # an older incarnation of the name
            self.drop(stream.cfg.name, name)
        consumer = Consumer(
            stream,
            name,
            entry.cfg,
            MemoryConsumerStore(),
            entry.created_ns,
            fsm=entry.fsm,
            link=StreamGroupLink(rg),
            group_name=entry.group,
        )
        consumer.retention = self.retention(stream)
        self.consumers.setdefault(stream.cfg.name, {})[name] = consumer
        self._spawn(stream, consumer)
        return consumer

    def drop(self, stream: str, name: str) -> Consumer | None:
        """Stop the shell of a replicated consumer its table removed (None
        if there was none)."""
        consumer = self.consumers.get(stream, {}).pop(name, None)
        if consumer is None:
            return None
        consumer.removed = True
        scope = self._scopes.pop((stream, name), None)
        if scope is not None:
            scope.cancel()
        consumer.closed = True
        consumer.changed.set()
        return consumer

    async def update(self, consumer: Consumer, cfg: ConsumerConfig) -> None:
        """Apply a changed config and persist it."""
        filters_changed = cfg.filters != consumer.cfg.filters
        await consumer.update(cfg)
        r = consumer.retention
        if r is not None and filters_changed and r.interest:
            await r.refresh_interest()
            await r.sweep(consumer.fsm.floor_sseq + 1)
        d = self._dir(consumer.stream.cfg.name, consumer.name)
        if d is not None and self._durable(consumer.stream, cfg):
            await trio.to_thread.run_sync(_write_json, d / "config.json", cfg, consumer.created_ns)

    async def delete(self, stream: str, name: str) -> Consumer:
        """Stop a consumer and remove its files."""
        consumer = self.consumers[stream].pop(name)
        consumer.removed = True
        self._scopes.pop((stream, name)).cancel()
        consumer.closed = True
        consumer.changed.set()
        d = self._dir(stream, name)
        if d is not None:
            await trio.to_thread.run_sync(lambda: shutil.rmtree(d, ignore_errors=True))
        if consumer.retention is not None:
            await consumer.retention.consumer_removed(consumer)
        return consumer

    def drop_stream(self, stream: str) -> list[Consumer]:
        """Stop every consumer of a deleted stream (its directory goes with it)."""
        gone = list(self.consumers.pop(stream, {}).values())
        self.retentions.pop(stream, None)
        for c in gone:
            c.removed = True
            self._scopes.pop((stream, c.name)).cancel()
            c.closed = True
            c.changed.set()
        return gone

    def saved(self, stream: str) -> list[tuple[str, ConsumerConfig, int]]:
        """Consumer configs found on disk for ``stream``."""
        if self.dir is None:
            return []
        root = self.dir / "streams" / stream / "consumers"
        if not root.is_dir():
            return []
        out = []
        for d in sorted(root.iterdir()):
            f = d / "config.json"
            if f.is_file():
                try:
                    doc = json.loads(f.read_text())
                    cfg = ConsumerConfig.from_dict(doc["config"])
                    created_ns = int(doc["created_ns"])
                except Exception as exc:  # any damage: set it aside, serve the rest
                    self.quarantine_dir(stream, d, f"{f}: {type(exc).__name__}: {exc}")
                    continue
                out.append((d.name, cfg, created_ns))
        return out

    def quarantine_dir(self, stream: str, d: Path, reason: str) -> None:
        """Rename a consumer directory that cannot be recovered aside (logged)."""
        assert self.dir is not None
        Quarantine(self.dir).put("consumer", f"{stream}.{d.name}", d, reason)


def _write_json(path: Path, cfg: ConsumerConfig, created_ns: int) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        json.dump({"config": cfg.to_dict(), "created_ns": created_ns}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
