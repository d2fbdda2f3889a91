"""File layer under the Raft journal and snapshots, with a crash-simulating twin.

Theory of operation
-------------------
Everything Raft keeps on disk goes through a :class:`Disk`: named files that
are appended to (not durable until :meth:`Disk.sync`) or replaced atomically
and durably (:meth:`Disk.write_atomic`). Two implementations:

* :class:`OsDisk` — real files in one directory; ``sync`` is ``fsync``;
  ``write_atomic`` writes a temp file, fsyncs it, renames it over the target
  and fsyncs the directory.  With ``preallocate`` (the stream groups'
  journals) an appended file is kept ahead of its data by zeros written in
  advance (a quarter of the file, 64 KiB to 1 MiB at a time): an append
  overwrites zeros already allocated and ``sync`` is ``fdatasync``, which then
  has no metadata to commit (no size change, no new block, no mtime) -- on
  ext4 the file system's journal commit is skipped, and with it most of the
  fsync's time when several processes sync at once (``bench/README.md``,
  branch ``r3f15``).  The zeros are the file's unused end: the owner's replay
  (``raft.journal``) stops at them and cuts them, so a file is opened for
  appending holding only what was written.
* :class:`MemoryDisk` — in memory, keeping *durable* and *pending* bytes apart.
  :meth:`MemoryDisk.crash` models power loss: pending (un-synced) appends are
  dropped, optionally keeping a random prefix (a torn write). Used by the
  deterministic simulator and by the durability tests.

Both are synchronous; the trio driver calls ``sync`` through
``trio.to_thread`` when configured to.
"""

from __future__ import annotations

import os
import random
import re
from typing import Protocol

__all__ = ["Disk", "MemoryDisk", "OsDisk", "safe_file_stem"]


def safe_file_stem(group_id: str) -> str:
    """A group id as a file name stem: bytes outside ``[A-Za-z0-9_.-]`` become ``%XX``."""
    return re.sub(r"[^A-Za-z0-9_.-]", lambda mo: f"%{ord(mo.group()):02X}", group_id)


class Disk(Protocol):
    """Named files for the journal and snapshots."""

    def read(self, name: str) -> bytes | None:
        """Whole contents (durable + pending), or None if the file does not exist."""

    def append(self, name: str, data: bytes) -> None:
        """Append bytes, creating the file; not durable until :meth:`sync`."""

    def sync(self, name: str) -> None:
        """Make every append to ``name`` so far durable (fsync)."""

    def truncate(self, name: str, size: int) -> None:
        """Cut the file to ``size`` bytes, durably."""

    def size(self, name: str) -> int:
        """Current length in bytes (durable + pending), 0 if the file does not exist."""

    def write_atomic(self, name: str, data: bytes) -> None:
        """Replace the file's contents atomically and durably."""

    def remove(self, name: str) -> None:
        """Delete the file if it exists."""


#: a preallocating OsDisk writes zeros ahead in runs of a quarter of the file, within these
PREALLOCATE_BYTES_MIN = 64 * 1024
PREALLOCATE_BYTES_MAX = 1024 * 1024


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n


class OsDisk:
    """Real files in ``root`` (created if missing).

    Args:
        root: the directory.
        preallocate: appends overwrite zeros written ahead, ``sync`` is
            ``fdatasync`` (module docstring); a file appended to must have
            been read and cut to its data first (the journal's replay does).
    """

    def __init__(self, root: str | os.PathLike[str], *, preallocate: bool = False) -> None:
        self.root = os.fspath(root)
        os.makedirs(self.root, exist_ok=True)
        self.preallocate = preallocate
        self._fds: dict[str, int] = {}
        #: sizes of the open files as our own writes left them (no ``fstat`` per
        #: journal append: each syscall in the sync thread is one more hand-over
        #: of the GIL with the event loop); dropped when a write fails midway
        self._sizes: dict[str, int] = {}
        #: preallocating: where the zeros written ahead of an open file's data end
        self._ends: dict[str, int] = {}
        #: zero runs written ahead (preallocating)
        self.preallocations = 0

    def _path(self, name: str) -> str:
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"bad file name {name!r}")
        return os.path.join(self.root, name)

    def _fd(self, name: str) -> int:
        fd = self._fds.get(name)
        if fd is None:
            path = self._path(name)
            if not self.preallocate:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            else:
                try:
                    fd = os.open(path, os.O_WRONLY)
                except FileNotFoundError:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
                    self._sync_dir()  # its name survives a power loss with its data
                # what the owner wrote is all of it (a replay cut any zeros)
                self._sizes[name] = self._ends[name] = os.fstat(fd).st_size
            self._fds[name] = fd
        return fd

    def _close(self, name: str) -> None:
        self._sizes.pop(name, None)
        self._ends.pop(name, None)
        fd = self._fds.pop(name, None)
        if fd is not None:
            os.close(fd)

    def read(self, name: str) -> bytes | None:
        try:
            with open(self._path(name), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def append(self, name: str, data: bytes) -> None:
        if self.preallocate:
            self._append_in_place(name, data)
            return
        fd = self._fd(name)
        size = self._sizes.pop(name, None)  # unknown until the whole write succeeded
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if size is not None:
            self._sizes[name] = size + len(data)

    def _append_in_place(self, name: str, data: bytes) -> None:
        """Preallocating: write ``data`` over the zeros after the file's data,
        writing more zeros ahead first when they run out."""
        fd = self._fd(name)
        size = self._sizes.pop(name, None)
        end = self._ends.pop(name, None)
        if size is None or end is None:  # after a failed write, cut back by the owner
            size = end = os.fstat(fd).st_size
        need = size + len(data)
        if need > end:
            ahead = min(PREALLOCATE_BYTES_MAX, max(PREALLOCATE_BYTES_MIN, size // 4))
            grow = max(need - end, ahead)
            _pwrite_all(fd, bytes(grow), end)  # made durable by the next sync
            end += grow
            self.preallocations += 1
        _pwrite_all(fd, data, size)
        self._sizes[name] = need
        self._ends[name] = end

    def sync(self, name: str) -> None:
        if self.preallocate:
            # data written over zeros already allocated: no metadata to commit
            # (a size change, after zeros were written ahead, is flushed too)
            os.fdatasync(self._fd(name))
        else:
            os.fsync(self._fd(name))

    def size(self, name: str) -> int:
        fd = self._fds.get(name)
        if fd is not None:  # the journal's, before each append: no path lookup
            size = self._sizes.get(name)
            if size is None:
                size = self._sizes[name] = os.fstat(fd).st_size
            return size
        try:
            return os.stat(self._path(name)).st_size
        except FileNotFoundError:
            return 0

    def truncate(self, name: str, size: int) -> None:
        fd = self._fd(name)
        self._sizes.pop(name, None)
        self._ends.pop(name, None)
        os.ftruncate(fd, size)
        os.fsync(fd)

    def _sync_dir(self) -> None:
        dfd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def write_atomic(self, name: str, data: bytes) -> None:
        path = self._path(name)
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        self._close(name)
        os.replace(tmp, path)
        self._sync_dir()

    def remove(self, name: str) -> None:
        self._close(name)
        try:
            os.unlink(self._path(name))
        except FileNotFoundError:
            return
        self._sync_dir()

    def close(self) -> None:
        """Close open file descriptors (contents stay)."""
        for name in list(self._fds):
            self._close(name)


class MemoryDisk:
    """In-memory files that lose un-synced appends at :meth:`crash`."""

    def __init__(self) -> None:
        self.durable: dict[str, bytearray] = {}
        self.pending: dict[str, bytearray] = {}
        self.syncs = 0

    def read(self, name: str) -> bytes | None:
        if name not in self.durable and name not in self.pending:
            return None
        return bytes(self.durable.get(name, b"")) + bytes(self.pending.get(name, b""))

    def append(self, name: str, data: bytes) -> None:
        self.pending.setdefault(name, bytearray()).extend(data)

    def sync(self, name: str) -> None:
        self.syncs += 1
        d = self.durable.setdefault(name, bytearray())
        p = self.pending.pop(name, None)
        if p is not None:
            d.extend(p)

    def size(self, name: str) -> int:
        return len(self.durable.get(name, b"")) + len(self.pending.get(name, b""))

    def truncate(self, name: str, size: int) -> None:
        whole = self.read(name) or b""
        self.pending.pop(name, None)
        self.durable[name] = bytearray(whole[:size])

    def write_atomic(self, name: str, data: bytes) -> None:
        self.pending.pop(name, None)
        self.durable[name] = bytearray(data)

    def remove(self, name: str) -> None:
        self.pending.pop(name, None)
        self.durable.pop(name, None)

    def crash(self, rng: random.Random | None = None) -> None:
        """Power loss: drop un-synced appends (with ``rng``, keep a random torn prefix)."""
        if rng is not None:
            for name, p in sorted(self.pending.items()):
                keep = rng.randrange(len(p) + 1) if p else 0
                if keep:
                    self.durable.setdefault(name, bytearray()).extend(p[:keep])
        self.pending.clear()
