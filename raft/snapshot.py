"""Snapshots: the StateMachine's bytes plus Raft's base entries, durable, no pickle.

Theory of operation
-------------------
pysyncobj compacts its log by asking a *Serializer* to dump the state, and
ships that dump to lagging followers in chunks (``append_entries`` with a
``serialized`` field). Its stock Serializer pickles, writes with ``open()``
and renames without fsync, and reassembles chunks with no offsets or checksum
(a lost or duplicated chunk silently corrupts the follower's dump).

:class:`SnapshotStore` owns the snapshot file on a :class:`~raft.storage.Disk`.
Its :meth:`~SnapshotStore.write_hook` / :meth:`~SnapshotStore.read_hook` are
what :mod:`raft.core` installs as pysyncobj's ``SyncObjConf.serializer`` /
``deserializer`` hooks (with ``fullDumpFile`` = the snapshot's file name), and
:class:`ChunkedSerializer` stands in for pysyncobj's Serializer object, calling
those hooks. File format::

    b"TJSNAP1\\n" | u64 body_len | u32 crc32(body) | body
    body = CBOR [last_entry, prev_entry, member_ids, fsm_bytes]
    entry = [command: bytes, idx, term]

Transfer chunks are ``u64 snapshot_idx | u64 offset | u64 total | data``; the
receiver accepts only the next expected offset of the same snapshot and
verifies the checksum before installing. A broken transfer is dropped; the
leader restarts it after the follower's next reset response.

The write is durable (atomic replace + fsync) *before* pysyncobj deletes the
compacted journal prefix.  With ``SnapshotStore.defer_writes`` (the trio
driver) the state is captured at once (``fsm.snapshot()``, between two
applies) but the file is written by the driver in its sync thread, off the
event loop (:meth:`SnapshotStore.take_write`, :meth:`SnapshotStore.write_done`);
pysyncobj sees "serializing" meanwhile and compacts only once it is done.
"""

from __future__ import annotations

import io
import logging
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import cbor2
from pysyncobj.node import Node

from raft.fsm import StateMachine
from raft.journal import JournalEntry
from raft.storage import Disk

__all__ = ["ChunkedSerializer", "Snapshot", "SnapshotStore"]

log = logging.getLogger(__name__)

MAGIC = b"TJSNAP1\n"
_HDR = struct.Struct(">QI")
_CHUNK = struct.Struct(">QQQ")

# pysyncobj.config.SERIALIZER_STATE
_NOT_SERIALIZING = 0
_SERIALIZING = 1
_SUCCESS = 2
_FAILED = 3


@dataclass(frozen=True)
class Snapshot:
    last: JournalEntry
    prev: JournalEntry
    members: tuple[str, ...]
    fsm_bytes: bytes


def _entry(e: Any) -> JournalEntry:
    if not (isinstance(e, list | tuple) and len(e) == 3):
        raise ValueError("bad entry")
    cmd, idx, term = e
    if type(cmd) is not bytes or type(idx) is not int or type(term) is not int:
        raise ValueError("bad entry fields")
    return (cmd, idx, term)


def encode_snapshot(s: Snapshot) -> bytes:
    body = cbor2.dumps([list(s.last), list(s.prev), list(s.members), s.fsm_bytes])
    return MAGIC + _HDR.pack(len(body), zlib.crc32(body)) + body


def decode_snapshot(blob: bytes) -> Snapshot:
    """Parse and verify a snapshot file; raises ValueError if it is not intact."""
    if len(blob) < len(MAGIC) + _HDR.size or not blob.startswith(MAGIC):
        raise ValueError("not a snapshot")
    blen, crc = _HDR.unpack_from(blob, len(MAGIC))
    body = blob[len(MAGIC) + _HDR.size :]
    if len(body) != blen or zlib.crc32(body) != crc:
        raise ValueError("snapshot checksum/length mismatch")
    raw = cbor2.loads(body)
    if not (isinstance(raw, list) and len(raw) == 4):
        raise ValueError("bad snapshot body")
    members = raw[2]
    if not (isinstance(members, list) and all(type(m) is str for m in members)):
        raise ValueError("bad members")
    if type(raw[3]) is not bytes:
        raise ValueError("bad fsm bytes")
    return Snapshot(_entry(raw[0]), _entry(raw[1]), tuple(members), raw[3])


class SnapshotStore:
    """The group's snapshot file and its StateMachine."""

    def __init__(self, disk: Disk, name: str, fsm: StateMachine) -> None:
        self.disk = disk
        self.name = name
        self.fsm = fsm
        self.taken = 0
        self.installed = 0
        #: hand snapshot file writes to the owner (take_write / write_done)
        self.defer_writes = False
        #: a captured snapshot waiting to be written (deferred mode)
        self.pending_write: tuple[str, bytes] | None = None
        #: None: no deferred write in progress; else its outcome once known
        self.write_outcome: bool | None = None
        self.writing = False

    def write_hook(self, file_name: str, data: Any) -> None:
        """pysyncobj ``serializer`` hook: ``data`` = (last_entry, prev_entry, cluster nodes)."""
        last, prev, cluster = data
        snap = Snapshot(
            _entry(last),
            _entry(prev),
            tuple(sorted(str(n.id) for n in cluster)),
            self.fsm.snapshot(),
        )
        blob = encode_snapshot(snap)
        if self.defer_writes:
            self.pending_write = (file_name, blob)
            self.writing = True
            self.write_outcome = None
            return
        self.disk.write_atomic(file_name, blob)
        self.taken += 1

    def take_write(self) -> tuple[str, bytes] | None:
        """The captured snapshot the owner must write now (deferred mode), once."""
        job, self.pending_write = self.pending_write, None
        return job

    def write_blob(self, name: str, blob: bytes) -> None:
        """Write a taken snapshot durably (any thread; the owner waits for it)."""
        self.disk.write_atomic(name, blob)

    def write_done(self, ok: bool) -> None:
        """The owner wrote (or failed to write) the taken snapshot."""
        self.write_outcome = ok
        if ok:
            self.taken += 1

    def read_hook(self, file_name: str) -> tuple[JournalEntry, JournalEntry, list[Node]]:
        """pysyncobj ``deserializer`` hook: restores the fsm, returns (last, prev, members)."""
        snap = self.load(file_name)
        if snap is None:
            raise ValueError("no snapshot")
        self.restore(snap)
        return snap.last, snap.prev, [Node(m) for m in snap.members]

    def load(self, file_name: str | None = None) -> Snapshot | None:
        """Read and verify the snapshot file (None if absent or damaged; damage is logged)."""
        blob = self.disk.read(file_name or self.name)
        if blob is None:
            return None
        try:
            return decode_snapshot(blob)
        except (ValueError, cbor2.CBORDecodeError) as e:
            log.error("event=snapshot_unreadable file=%s error=%r", self.name, e)
            return None

    def restore(self, snap: Snapshot) -> None:
        self.fsm.restore(io.BytesIO(snap.fsm_bytes))


class ChunkedSerializer:
    """Duck-typed replacement for ``pysyncobj.serializer.Serializer``."""

    def __init__(self, store: SnapshotStore, chunk_bytes: int) -> None:
        self.store = store
        self.chunk_bytes = chunk_bytes
        self._done_id: int | None = None
        self._failed = False
        self._out: dict[Any, tuple[bytes, int, int]] = {}  # node -> (blob, snap idx, offset)
        self._in: bytearray | None = None
        self._in_id = -1
        self._in_total = 0
        self._blob_cache: tuple[bytes, int] | None = None

    # -- log compaction

    def checkSerializing(self) -> tuple[int, int | None]:
        st = self.store
        if st.writing:
            if st.write_outcome is None:
                return _SERIALIZING, None
            st.writing = False
            self._failed = not st.write_outcome
            self._blob_cache = None
        if self._done_id is not None:
            i, self._done_id = self._done_id, None
            if self._failed:
                self._failed = False
                return _FAILED, i
            return _SUCCESS, i
        return _NOT_SERIALIZING, None

    def serialize(self, data: Any, id: int) -> None:
        try:
            self.store.write_hook(self.store.name, data[1:])
        except Exception:
            log.exception("event=snapshot_write_failed file=%s", self.store.name)
            self._failed = True
        self._blob_cache = None
        self._done_id = id

    def deserialize(self) -> tuple[None, JournalEntry, JournalEntry, list[Node]]:
        return (None, *self.store.read_hook(self.store.name))

    # -- transfer to followers (leader side)

    def _blob(self) -> tuple[bytes, int] | None:
        if self._blob_cache is None:
            blob = self.store.disk.read(self.store.name)
            if blob is None:
                return None
            try:
                snap = decode_snapshot(blob)
            except ValueError:
                return None
            self._blob_cache = (blob, snap.last[1])
        return self._blob_cache

    def getTransmissionData(self, node: Any) -> tuple[bytes, bool, bool] | None:
        cur = self._blob()
        if cur is None:
            return None
        t = self._out.get(node)
        if t is None or t[1] != cur[1]:
            t = (cur[0], cur[1], 0)
        blob, sid, off = t
        chunk = blob[off : off + self.chunk_bytes]
        end = off + len(chunk)
        is_last = end >= len(blob)
        if is_last:
            self._out.pop(node, None)
        else:
            self._out[node] = (blob, sid, end)
        return _CHUNK.pack(sid, off, len(blob)) + chunk, off == 0, is_last

    def cancelTransmisstion(self, node: Any) -> None:
        # Keep the position: raft.core marks a peer "disconnected" to end a cycle's
        # sending early, and restarting the transfer then would never finish it.
        # A follower that lost its partial copy rejects chunks until the next start.
        return

    # -- transfer (follower side)

    def setTransmissionData(self, data: Any) -> bool:
        if data is None:
            return False
        chunk, is_first, is_last = data
        if len(chunk) < _CHUNK.size:
            return False
        sid, off, total = _CHUNK.unpack_from(chunk, 0)
        payload = chunk[_CHUNK.size :]
        if is_first or off == 0:
            self._in, self._in_id, self._in_total = bytearray(), sid, total
        if self._in is None or sid != self._in_id or off != len(self._in):
            self._in = None
            return False
        self._in += payload
        if len(self._in) > self._in_total:
            self._in = None
            return False
        if not is_last:
            return False
        blob, self._in = bytes(self._in), None
        if len(blob) != total:
            return False
        try:
            incoming = decode_snapshot(blob)
        except ValueError:
            log.warning("event=snapshot_transfer_corrupt sid=%d", sid)
            return False
        local = self.store.load()
        if local is not None and local.last[1] >= incoming.last[1]:
            # never replace a newer local snapshot (its journal was compacted to it)
            return True
        self.store.disk.write_atomic(self.store.name, blob)
        self._blob_cache = None
        self.store.installed += 1
        return True
