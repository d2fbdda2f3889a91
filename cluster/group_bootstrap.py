"""The bootstrap file of a stream group born from an R1 store (``cluster.replicated``).

``raft/bootstrap.cbor`` in a stream's directory says: this store is the
group's first state, and these are the consumers the R1 stream had (config
and state, as ``ConsumerTable.snapshot`` gives them).  Written (durably)
before the group first runs, removed once the group took its first snapshot.
"""

from __future__ import annotations

import os
from pathlib import Path

import cbor2

__all__ = [
    "BOOTSTRAP_FILE",
    "ConsumerEntry",
    "read_bootstrap",
    "unlink_bootstrap",
    "write_bootstrap",
]

#: present while a group born from an R1 store has not taken its first snapshot
BOOTSTRAP_FILE = "bootstrap.cbor"

ConsumerEntry = tuple[str, bytes, int, str, bytes]
"""A consumer as ``ConsumerTable.snapshot`` gives it: name, config, created, group, state."""


def write_bootstrap(raft_dir: Path, consumers: list[ConsumerEntry]) -> None:
    """Mark ``raft_dir`` as a group to be born from the store beside it
    (write-fsync-rename; the directory is made and synced)."""
    raft_dir.mkdir(parents=True, exist_ok=True)
    tmp = raft_dir / (BOOTSTRAP_FILE + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(cbor2.dumps({"v": 1, "consumers": [list(c) for c in consumers]}))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, raft_dir / BOOTSTRAP_FILE)
    _fsync_dir(raft_dir)
    _fsync_dir(raft_dir.parent)


def read_bootstrap(raft_dir: Path) -> list[ConsumerEntry] | None:
    """The consumers of a pending bootstrap, None when there is none.

    Raises:
        ValueError: the file is there but malformed.
    """
    try:
        raw = (raft_dir / BOOTSTRAP_FILE).read_bytes()
    except FileNotFoundError:
        return None
    doc = cbor2.loads(raw)
    if not isinstance(doc, dict) or doc.get("v") != 1 or not isinstance(doc.get("consumers"), list):
        raise ValueError("bootstrap.cbor: unknown format")
    out: list[ConsumerEntry] = []
    for c in doc["consumers"]:
        name, cfg, created, group, state = c
        if not (
            isinstance(name, str)
            and isinstance(cfg, bytes)
            and isinstance(created, int)
            and isinstance(group, str)
            and isinstance(state, bytes)
        ):
            raise ValueError("bootstrap.cbor: malformed consumer")
        out.append((name, cfg, created, group, state))
    return out


def unlink_bootstrap(raft_dir: Path) -> None:
    (raft_dir / BOOTSTRAP_FILE).unlink(missing_ok=True)
    _fsync_dir(raft_dir)


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
