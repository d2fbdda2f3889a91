"""Fixtures: every StreamStore implementation behind one factory."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from store.api import StreamStore
from store.file import FileStreamStore
from store.file.checkpoint import checkpoints_settled
from store.limits import Accounting, StreamLimits
from store.memory import MemoryStreamStore


@dataclass
class Kit:
    """How to open (and reopen) one kind of store."""

    name: str
    durable: bool
    accounting: Accounting
    open: Callable[[StreamLimits | None], StreamStore]

    def reopen(self, st: StreamStore) -> StreamStore:
        """Close and reopen a durable store (memory stores are returned as is)."""
        if not self.durable:
            return st
        st.close()
        return self.open(st.limits)


KINDS = ["memory", "file", "file-lz4", "file-tiny"]


def make_kit(kind: str, directory: Path) -> Kit:
    if kind == "memory":
        return Kit(kind, False, Accounting.MEMORY, lambda lim: MemoryStreamStore(lim))
    opts: dict[str, object] = {
        "file": {},
        "file-lz4": {"compression": True, "segment_bytes_max": 4096},
        "file-tiny": {"segment_bytes_max": 200},
    }[kind]

    def opener(lim: StreamLimits | None) -> StreamStore:
        return FileStreamStore(directory, lim, **opts)  # type: ignore[arg-type]

    return Kit(kind, True, Accounting.FILE, opener)


@pytest.fixture(params=KINDS)
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kit]:
    yield make_kit(request.param, tmp_path / "stream")


@pytest.fixture
def fresh_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as d:
        try:
            yield Path(d)
        finally:
            checkpoints_settled()  # a store dropped unclosed may still be writing one
