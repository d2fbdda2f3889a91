"""Power loss: a small FUSE file system that forgets what was not fsynced (the LazyFS idea).

Theory of operation: each node's store dir is a FUSE mount (mfusepy over libfuse3) served by its
own helper process (``python -m chaos.powerloss BACKING MOUNT SOCKET``) that passes every
operation through to a backing directory.  Writes reach the backing file at once, so reads are
plain, but before a write or truncate changes bytes that are not yet durable, the helper keeps an
*undo record* (offset, old bytes, old size) for that file.  ``fsync`` of a file makes its current
content durable: its undo records are dropped.  A file created since the last fsync of itself or
of its directory is *new*.  On ``crash`` (after the server was SIGKILLed) the helper, under its
lock, applies every file's undo records newest first, restores each file's durable size, and
empties new files: the data left is exactly the data that was fsynced.  A write through a file
descriptor opened with O_SYNC or O_DSYNC is durable on return (taken as an fsync of its file).  As in LazyFS, metadata
operations (create, mkdir, rename, unlink) pass through and are durable at once; only file data
waits for fsync (so lost directory entries are not modelled).

Mount options turn kernel caching off (``direct_io``, zero attribute and entry timeouts), so after
a crash nobody reads stale pages.  The harness talks to a helper over a UNIX socket in the node's
work dir: one line ``crash`` -> one JSON line with what was dropped; ``full on`` / ``full off``
make writes and creates fail with ENOSPC (the disk-full fault, F11) until turned off.  ``mount_all`` mounts every
node's store dir before the servers start; ``close`` unmounts (``fusermount3 -u``) and ends the
helpers.  Requires /dev/fuse, libfuse3 and root (or fusermount3); without them the run notes why
and the power-loss scenarios do nothing.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

MOUNT_TIMEOUT_S = 10.0
CTL_TIMEOUT_S = 10.0


class LazyOps:
    """The FUSE operations (mfusepy calls them on its threads; one lock serialises them)."""

    use_ns = True

    def __init__(self, backing: str) -> None:
        self.root = backing
        self.mu = threading.RLock()
        self.undo: dict[str, list[tuple[int, bytes]]] = {}  # path -> [(offset, old bytes)]
        self.size0: dict[str, int] = {}  # path -> durable size
        self.new: set[str] = set()  # created, not yet durable
        self.fds: dict[int, str] = {}
        self.sync_fds: set[int] = set()  # opened with O_SYNC / O_DSYNC: each write is durable
        self.full = False  # disk-full fault: writes and creates fail with ENOSPC

    def _space(self) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "no space left on device (chaos disk-full)")

    def _p(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _remember(self, full: str, fd: int, offset: int, length: int) -> None:
        size = os.fstat(fd).st_size
        self.size0.setdefault(full, size)
        if offset < size and length > 0:
            old = os.pread(fd, min(length, size - offset), offset)
            self.undo.setdefault(full, []).append((offset, old))

    # -- metadata ---------------------------------------------------------------------------
    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        st = os.lstat(self._p(path))
        keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size")
        out = {k: getattr(st, k) for k in keys if hasattr(st, k)}
        out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return out

    def readdir(self, path: str, fh: Any) -> list[str]:
        return [".", "..", *os.listdir(self._p(path))]

    def statfs(self, path: str) -> dict[str, Any]:
        sv = os.statvfs(self._p(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files")
        return {k: getattr(sv, k) for k in (*keys, "f_flag", "f_frsize", "f_namemax")}

    def access(self, path: str, amode: int) -> int:
        return 0 if os.access(self._p(path), amode) else -errno.EACCES

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._p(path), mode)
        return 0

    def utimens(self, path: str, times: Any = None) -> int:
        os.utime(self._p(path), ns=times) if times else os.utime(self._p(path))
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._p(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._p(path))
        return 0

    def unlink(self, path: str) -> int:
        with self.mu:
            full = self._p(path)
            os.unlink(full)
            self._forget(full)
        return 0

    def rename(self, old: str, new: str) -> int:
        with self.mu:
            a, b = self._p(old), self._p(new)
            os.rename(a, b)
            self._forget(b)
            for table in (self.undo, self.size0):
                if a in table:
                    table[b] = table.pop(a)
            if a in self.new:
                self.new.discard(a)
                self.new.add(b)
        return 0

    def _forget(self, full: str) -> None:
        self.undo.pop(full, None)
        self.size0.pop(full, None)
        self.new.discard(full)

    # -- files ------------------------------------------------------------------------------
    def create(self, path: str, mode: int, flags: int = 0) -> int:
        self._space()
        with self.mu:
            full = self._p(path)
            fd = os.open(full, os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)
            self.new.add(full)
            self.fds[fd] = full
            if flags & (os.O_SYNC | os.O_DSYNC):
                self.sync_fds.add(fd)
            return fd

    def open(self, path: str, flags: int) -> int:
        full = self._p(path)
        plain = flags & ~(os.O_APPEND | os.O_TRUNC | os.O_CREAT | os.O_EXCL)
        if flags & os.O_ACCMODE != os.O_RDONLY:  # writers also read (undo records)
            plain = (plain & ~os.O_ACCMODE) | os.O_RDWR
        fd = os.open(full, plain)
        with self.mu:
            self.fds[fd] = full
            if flags & (os.O_SYNC | os.O_DSYNC):
                self.sync_fds.add(fd)
            if flags & os.O_TRUNC:
                self._truncate_fd(full, fd, 0)
        return fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        self._space()
        with self.mu:
            full = self.fds.get(fh, self._p(path))
            if fh in self.sync_fds:  # O_SYNC: durable on return (taken as an fsync of the file)
                n = os.pwrite(fh, data, offset)
                self._forget(full)
                return n
            if full not in self.new:
                self._remember(full, fh, offset, len(data))
            return os.pwrite(fh, data, offset)

    def _truncate_fd(self, full: str, fd: int, length: int) -> None:
        if full not in self.new:
            size = os.fstat(fd).st_size
            self._remember(full, fd, length, max(0, size - length))
        os.ftruncate(fd, length)

    def truncate(self, path: str, length: int, fh: Any = None) -> int:
        with self.mu:
            full = self._p(path)
            fd = os.open(full, os.O_RDWR)
            try:
                self._truncate_fd(full, fd, length)
            finally:
                os.close(fd)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self.mu:
            full = self.fds.get(fh, self._p(path))
            os.fsync(fh)
            self._forget(full)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: Any) -> int:
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        with self.mu:
            self.fds.pop(fh, None)
            self.sync_fds.discard(fh)
            os.close(fh)
        return 0

    # -- the fault --------------------------------------------------------------------------
    def crash(self) -> dict[str, int]:
        """Drop everything not fsynced; returns counts."""
        with self.mu:
            restored = dropped = 0
            for full, records in self.undo.items():
                if not os.path.exists(full):
                    continue
                with open(full, "r+b") as fh:
                    for offset, old in reversed(records):
                        fh.seek(offset)
                        fh.write(old)
                        restored += len(old)
                    fh.truncate(self.size0.get(full, os.path.getsize(full)))
            for full, size in self.size0.items():
                if full not in self.undo and os.path.exists(full):
                    os.truncate(full, size)
            for full in self.new:
                with contextlib.suppress(FileNotFoundError):
                    dropped += os.path.getsize(full)
                    os.truncate(full, 0)
            out = {"files_rolled_back": len(self.size0), "bytes_restored": restored,
                   "new_files_emptied": len(self.new), "new_bytes_dropped": dropped,
                   "examples": sorted(os.path.relpath(f, self.root) for f in self.new)[:12],
                   "rolled_back": sorted(os.path.relpath(f, self.root) for f in self.size0)[:12]}  # fmt: skip
            self.undo.clear()
            self.size0.clear()
            self.new.clear()
            return out


def _serve_ctl(ops: LazyOps, sock_path: str) -> None:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(4)
    for _ in range(10**9):  # serves until the helper ends; bounded by count all the same
        conn, _ = srv.accept()
        with conn:
            line = conn.makefile().readline().strip()
            reply: dict[str, Any]
            if line == "crash":
                reply = ops.crash()
            elif line in ("full on", "full off"):
                ops.full = line == "full on"
                reply = {"full": ops.full}
            else:
                reply = {"error": f"unknown command {line!r}"}
            conn.sendall((json.dumps(reply) + "\n").encode())


def helper_main(backing: str, mount: str, sock_path: str) -> None:
    """The helper process: serve the control socket and the FUSE mount (foreground)."""
    import mfusepy

    ops = LazyOps(backing)
    threading.Thread(target=_serve_ctl, args=(ops, sock_path), daemon=True).start()
    mfusepy.FUSE(ops, mount, foreground=True, direct_io=True, attr_timeout=0, entry_timeout=0,
                 negative_timeout=0, fsname="chaos-lazy")  # fmt: skip


def available() -> str | None:
    """None when power loss can be injected here, else why not."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if shutil.which("fusermount3") is None and os.geteuid() != 0:
        return "neither fusermount3 nor root"
    try:
        import mfusepy  # noqa: F401
    except Exception as exc:  # ImportError, or OSError when libfuse is missing
        return f"mfusepy unusable: {exc!r}"
    return None


class PowerLoss:
    """The helpers of one run: ``crash(node)`` drops that node's unsynced writes."""

    def __init__(self) -> None:
        self.helpers: dict[str, tuple[subprocess.Popen[bytes], Path, Path]] = {}

    def mount(self, name: str, mount: Path, workdir: Path) -> None:
        """Start ``name``'s helper; ``wait_mounted`` waits for it (the helpers of a run start
        together: each is a Python process, slow to start on a loaded machine)."""
        backing, sock = workdir / "store.backing", workdir / "lazyfs.sock"
        backing.mkdir(parents=True, exist_ok=True)
        mount.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()
        log = open(workdir / "lazyfs.log", "ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "chaos.powerloss", str(backing), str(mount), str(sock)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        self.helpers[name] = (proc, mount, sock)

    def wait_mounted(self) -> None:
        """Wait (bounded) until every helper's mount and control socket are up."""
        end = time.monotonic() + MOUNT_TIMEOUT_S
        for proc, mount, sock in self.helpers.values():
            while not (os.path.ismount(mount) and sock.exists()):  # bounded poll of a real state
                if time.monotonic() > end or proc.poll() is not None:
                    log = sock.parent / "lazyfs.log"
                    raise RuntimeError(f"lazyfs mount of {mount} failed; see {log}")
                time.sleep(0.05)

    def crash(self, name: str) -> dict[str, Any]:
        """Drop ``name``'s unsynced writes (its server must be dead)."""
        return self._command(name, "crash")

    def disk_full(self, name: str, on: bool) -> dict[str, Any]:
        """Make ``name``'s writes fail with ENOSPC (or stop doing so)."""
        return self._command(name, "full on" if on else "full off")

    def _command(self, name: str, line: str) -> dict[str, Any]:
        _proc, _mount, sock = self.helpers[name]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(CTL_TIMEOUT_S)
            s.connect(str(sock))
            s.sendall(line.encode() + b"\n")
            return json.loads(s.makefile().readline())

    def close(self) -> None:
        for proc, mount, _sock in self.helpers.values():
            for cmd in (["fusermount3", "-u", "-z", str(mount)], ["umount", "-l", str(mount)]):
                with contextlib.suppress(Exception):
                    if subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0:
                        break
            with contextlib.suppress(Exception):
                proc.terminate()
                proc.wait(timeout=5)
            if proc.poll() is None:
                proc.kill()


def mount_all(sup: Any, notes: list[str]) -> PowerLoss | None:
    """Mount a lazy FS on every node's store dir (before the servers start), or note why not."""
    why = available()
    if why is not None:
        notes.append(f"power loss unavailable: {why}")
        return None
    pl = PowerLoss()
    try:
        for name, node in sup.nodes.items():
            pl.mount(name, node.store_dir, node.workdir)
        pl.wait_mounted()
    except Exception as exc:
        pl.close()
        notes.append(f"power loss unavailable: {exc}")
        return None
    return pl


if __name__ == "__main__":
    helper_main(*sys.argv[1:4])
