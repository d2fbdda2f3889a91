"""The node's streams and their configs on disk.

``StreamRegistry`` keeps the streams of the node and their configs
(``<store_dir>/<name>/config.json`` written with write-fsync-rename), and
recreates them at start; ``restore`` creates a stream from a snapshot
document (installed before the stream runs).  A replicated stream's group is
made here (``_group_factory``); the stream shell itself is ``cluster.streams``.
"""

from __future__ import annotations

import io
import json
import logging
import os
import random
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from cluster.model import Compression, Retention, Storage, StreamConfig
from cluster.ops import Interest
from cluster.quarantine import Quarantine, Quarantined
from cluster.replica_spec import ReplicaSpec
from cluster.stream_fsm import StreamStateMachine
from cluster.streams import GroupFactory, Stream, policy_of
from store.api import StreamStore, SyncPolicy
from store.file import FileStreamStore
from store.memory import MemoryStreamStore

if TYPE_CHECKING:
    from cluster.replicated import ReplicatedGroup

__all__ = ["SavedConfigDamaged", "StreamExists", "StreamRegistry"]

log = logging.getLogger(__name__)


class SavedConfigDamaged(ValueError):
    """A stream directory's ``config.json`` cannot be read.

    Attributes:
        name: the stream.
        groups: the Raft groups whose journals the directory holds (a
            replicated stream's data belongs to the group that wrote it).
    """

    def __init__(self, name: str, reason: str, groups: frozenset[str]) -> None:
        super().__init__(f"stream {name!r}: config.json unreadable: {reason}")
        self.name = name
        self.groups = groups


class StreamExists(KeyError):
    """A stream by that name exists or is being created or restored."""


class StreamRegistry:
    """The node's streams, persisted under ``store_dir``.

    Args:
        store_dir: the JetStream directory (``<store_dir>/jetstream`` of nats-server).
        nursery: where stream tasks run.
    """

    def __init__(self, store_dir: str | None, nursery: trio.Nursery) -> None:
        self.dir = Path(store_dir) if store_dir else None
        self.nursery = nursery
        self.streams: dict[str, Stream] = {}
        self._scopes: dict[str, trio.CancelScope] = {}
        self._starting: set[str] = set()  # names being created or restored
        #: None: file stores are synced before each batch is answered (the
        #: default); seconds: the user's ``sync_interval`` (synced on a timer)
        self.sync_interval_s: float | None = None

    def _stream_dir(self, name: str) -> Path:
        assert self.dir is not None
        return self.dir / "streams" / name

    def _open_store(self, cfg: StreamConfig) -> StreamStore:
        if cfg.storage is Storage.MEMORY or self.dir is None:
            return MemoryStreamStore(cfg.limits())
        d = self._stream_dir(cfg.name) / "msgs"
        d.mkdir(parents=True, exist_ok=True)
        compress = cfg.compression is not Compression.NONE
        if self.sync_interval_s is None:
            return FileStreamStore(d, cfg.limits(), compression=compress)
        return FileStreamStore(
            d,
            cfg.limits(),
            compression=compress,
            sync_policy=SyncPolicy.INTERVAL,
            sync_interval_s=self.sync_interval_s,
        )

    def _claim(self, name: str) -> None:
        if name in self.streams or name in self._starting:
            raise StreamExists(name)
        self._starting.add(name)

    async def create(
        self,
        cfg: StreamConfig,
        created_ns: int | None = None,
        *,
        fresh: bool | None = None,
        replica: ReplicaSpec | None = None,
    ) -> Stream:
        """Create (or reopen) a stream and start its task.

        Args:
            cfg: its config.
            created_ns: its creation time (None: now).
            fresh: a new stream (default: when ``created_ns`` is None); False
                reopens the one on disk.

        Raises:
            StreamExists: the name is taken (or being restored).
        """
        self._claim(cfg.name)
        try:
            store = await trio.to_thread.run_sync(self._open_store, cfg)
            if fresh is None:
                fresh = created_ns is None
            if created_ns is None:
                created_ns = time.time_ns()
            if fresh:
                if cfg.first_seq > 1 and store.state().last_seq == 0:
                    store.compact(cfg.first_seq)
            factory = None if replica is None else self._group_factory(cfg, replica)
            stream = Stream(cfg, store, created_ns, group_factory=factory)
            if fresh and cfg.retention is Retention.INTEREST:
                # A new interest stream has no consumers: publishes before the
                # first consumer are not kept.  Part of the initial state (every
                # replica starts from the same config), so it is applied before
                # the stream takes its first publish, not proposed after.
                stream.fsm.apply_op(Interest(()))
            if self.dir is not None and cfg.storage is Storage.FILE:
                # a reopen rewrites (and syncs) the config only when it changed
                # (a cluster's assignment may carry an update made while down)
                write = self._write_config if fresh else self._write_config_if_changed
                await trio.to_thread.run_sync(write, cfg, created_ns)
            await self._launch(stream)
        finally:
            self._starting.discard(cfg.name)
        return stream

    def _group_factory(self, cfg: StreamConfig, replica: ReplicaSpec) -> GroupFactory:
        # only a clustered server gets here: a standalone one never imports the Raft stack
        from cluster.replicated import ReplicatedGroup

        raft_dir = self._stream_dir(cfg.name) / "raft"

        def make(fsm: StreamStateMachine, store: StreamStore) -> ReplicatedGroup:
            g = ReplicatedGroup(
                replica.group_id,
                replica.node_id,
                list(replica.peers),
                fsm,
                store,
                replica.links,
                raft_dir,
                random.Random(replica.seed),
                durable_store=cfg.storage is Storage.FILE,
                first_candidate=replica.first_candidate,
                # the user's sync_interval: the Raft log is synced on it too
                journal_fsync=store.sync_policy is not SyncPolicy.INTERVAL,
            )
            g.journal_entries_max = replica.journal_entries_max
            g.journal_bytes_max = replica.journal_bytes_max
            g.raft.config.leader_write_overlap = replica.leader_write_overlap
            return g

        return make

    async def regroup(self, cfg: StreamConfig, replica: ReplicaSpec) -> Stream:
        """Run R1 stream ``cfg.name`` as a replicated group over the same store
        (scaled up): the old ``Stream`` is quiesced and its task stopped, a
        new one takes the store (file or memory alike) and the group.

        Raises:
            KeyError: no such stream.
        """
        old = self.streams[cfg.name]
        await old.quiesce()
        self._scopes.pop(cfg.name).cancel()
        del self.streams[cfg.name]
        self._starting.add(cfg.name)
        try:
            factory = self._group_factory(cfg, replica)
            stream = Stream(cfg, old.store, old.created_ns, group_factory=factory)
            if self.dir is not None and cfg.storage is Storage.FILE:
                await trio.to_thread.run_sync(self._write_config, cfg, old.created_ns)
            await self._launch(stream)
        finally:
            self._starting.discard(cfg.name)
        return stream

    def raft_dir(self, name: str) -> Path | None:
        """Where stream ``name``'s group keeps its journal (None: no directory)."""
        return self._stream_dir(name) / "raft" if self.dir is not None else None

    async def _launch(self, stream: Stream) -> None:
        scope = trio.CancelScope()
        self._scopes[stream.cfg.name] = scope

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                try:
                    await stream.run(task_status=task_status)
                except Exception:
                    # One stream's failure must not take the server down; its
                    # data stays on disk and the log says why it stopped.
                    log.exception("event=stream_task_failed stream=%s", stream.cfg.name)

        await self.nursery.start(run)
        self.streams[stream.cfg.name] = stream

    async def restore(self, cfg: StreamConfig, created_ns: int, document: bytes) -> Stream:
        """Create stream ``cfg`` holding the state of a snapshot document.

        The document (``StreamStateMachine.snapshot()``) is installed into a
        fresh store before the stream runs; if its policy differs from
        ``cfg``'s, the new policy then goes through the group (limits apply).

        Raises:
            StreamExists: the name is taken (or being created or restored).
            StreamSnapshotError: the document is malformed; nothing is left behind.
            StoreError, OSError: the store failed; nothing is left behind.
        """
        self._claim(cfg.name)
        try:
            if self.dir is not None:  # leftovers of a stream that no longer exists
                await trio.to_thread.run_sync(self._remove_dir, cfg.name)
            store = await trio.to_thread.run_sync(self._open_store, cfg)
            stream = Stream(cfg, store, created_ns)
            try:
                await trio.to_thread.run_sync(stream.fsm.restore, io.BytesIO(document))
                if self.dir is not None and cfg.storage is Storage.FILE:
                    await trio.to_thread.run_sync(self._write_config, cfg, created_ns)
            except BaseException:
                store.close()
                if self.dir is not None:
                    with trio.CancelScope(shield=True):
                        await trio.to_thread.run_sync(self._remove_dir, cfg.name)
                raise
            await self._launch(stream)
        finally:
            self._starting.discard(cfg.name)
        if stream.fsm.policy != policy_of(cfg):
            await stream.update(cfg)
        return stream

    def _remove_dir(self, name: str) -> None:
        shutil.rmtree(self._stream_dir(name), ignore_errors=True)

    async def update(self, cfg: StreamConfig) -> Any:
        """Apply a new config to a running stream and persist it."""
        stream = self.streams[cfg.name]
        result = await stream.update(cfg)
        if self.dir is not None and cfg.storage is Storage.FILE:
            await trio.to_thread.run_sync(self._write_config, cfg, stream.created_ns)
        return result

    async def adopt(self, cfg: StreamConfig) -> None:
        """Take a config without proposing its policy (a follower's copy)."""
        stream = self.streams[cfg.name]
        stream.cfg = cfg
        stream.fsm.report_stored = cfg.republish is not None
        if self.dir is not None and cfg.storage is Storage.FILE:
            await trio.to_thread.run_sync(self._write_config, cfg, stream.created_ns)

    async def delete(self, name: str) -> None:
        """Stop a stream and remove its data."""
        stream = self.streams.pop(name)
        self._scopes.pop(name).cancel()
        stream.store.close()
        if self.dir is not None:
            await trio.to_thread.run_sync(
                lambda: shutil.rmtree(self._stream_dir(name), ignore_errors=True)
            )

    def _write_config(self, cfg: StreamConfig, created_ns: int) -> None:
        d = self._stream_dir(cfg.name)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "config.json.tmp"
        with open(tmp, "w") as fh:
            json.dump({"config": cfg.to_dict(), "created_ns": created_ns}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, d / "config.json")
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _write_config_if_changed(self, cfg: StreamConfig, created_ns: int) -> None:
        f = self._stream_dir(cfg.name) / "config.json"
        try:
            doc = json.loads(f.read_text())
            same = doc == {"config": cfg.to_dict(), "created_ns": created_ns}
        except (OSError, ValueError):
            same = False
        if not same:
            self._write_config(cfg, created_ns)

    def saved_one(self, name: str) -> tuple[StreamConfig, int] | None:
        """The config and creation time of stream ``name`` on disk, if any.

        Raises:
            SavedConfigDamaged: the directory is there but its config is not readable.
        """
        if self.dir is None:
            return None
        f = self._stream_dir(name) / "config.json"
        if not f.is_file():
            return None
        try:
            doc = json.loads(f.read_text())
            return StreamConfig.from_dict(doc["config"]), int(doc["created_ns"])
        except Exception as exc:  # any damage: the caller decides (it may know the config)
            raft = self._stream_dir(name) / "raft"
            groups = frozenset(p.stem for p in raft.glob("*.journal")) if raft.is_dir() else ()
            reason = f"{type(exc).__name__}: {exc}"
            raise SavedConfigDamaged(name, reason, frozenset(groups)) from exc

    def quarantine(self, name: str) -> str:
        """Move stream ``name``'s directory aside (never deleted); its new path."""
        assert self.dir is not None
        src = self._stream_dir(name)
        dst = self.dir / "quarantine" / f"{name}.{time.time_ns()}"
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
        return str(dst)

    def saved(self) -> list[tuple[StreamConfig, int]]:
        """Configs found on disk (for recovery at start)."""
        if self.dir is None or not (self.dir / "streams").is_dir():
            return []
        out = []
        for d in sorted((self.dir / "streams").iterdir()):
            f = d / "config.json"
            if f.is_file():
                try:
                    doc = json.loads(f.read_text())
                    cfg = StreamConfig.from_dict(doc["config"])
                    created_ns = int(doc["created_ns"])
                    if cfg.name != d.name:
                        raise ValueError(f"config names stream {cfg.name!r}")
                except Exception as exc:  # any damage: set it aside, serve the rest
                    self.quarantine_dir(d, f"{f}: {type(exc).__name__}: {exc}")
                    continue
                out.append((cfg, created_ns))
        return out

    def quarantine_dir(self, d: Path, reason: str) -> None:
        """Rename a stream directory that cannot be recovered aside (logged)."""
        assert self.dir is not None
        Quarantine(self.dir).put("stream", d.name, d, reason)

    def quarantined(self) -> list[Quarantined]:
        """Directories set aside, from this start or earlier ones."""
        return Quarantine(self.dir).found() if self.dir is not None else []
