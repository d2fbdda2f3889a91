"""A toy state machine for Raft tests, the simulator and chaos.raftnode.

It keeps every applied value in order plus a hash chain over them, so two
replicas with equal ``(count, chain)`` have applied identical sequences.
``apply`` returns the 1-based position of the value (like a stream sequence).
"""

from __future__ import annotations

import hashlib
from typing import BinaryIO

import cbor2


class ToyStateMachine:
    """Append-only list of values with a hash chain."""

    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.chain = b"\x00" * 16

    def apply(self, entry: bytes) -> int:
        self.values.append(entry)
        self.chain = hashlib.blake2b(self.chain + entry, digest_size=16).digest()
        return len(self.values)

    def snapshot(self) -> bytes:
        return cbor2.dumps([self.values, self.chain])

    def restore(self, reader: BinaryIO) -> None:
        values, chain = cbor2.loads(reader.read())
        self.values = list(values)
        self.chain = chain


class CountingStateMachine:
    """Keeps only a count and a hash chain (for large catch-up tests and benchmarks)."""

    def __init__(self) -> None:
        self.count = 0
        self.chain = b"\x00" * 16

    def apply(self, entry: bytes) -> int:
        self.count += 1
        self.chain = hashlib.blake2b(self.chain + entry, digest_size=16).digest()
        return self.count

    def snapshot(self) -> bytes:
        return cbor2.dumps([self.count, self.chain])

    def restore(self, reader: BinaryIO) -> None:
        self.count, self.chain = cbor2.loads(reader.read())
