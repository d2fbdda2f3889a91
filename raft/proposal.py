"""A proposal's outcome (``Proposal``), the batch encoding of several
proposals in one entry, and the leadership a member reports (``LeaderState``)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from raft.errors import RaftError

__all__ = ["LeaderState", "Proposal", "decode_batch", "encode_batch"]

_U32 = struct.Struct(">I")


class Proposal:
    """A proposal's outcome, filled in by :meth:`Ready.release`.

    ``on_done`` (if set) is called once, at release.
    """

    __slots__ = ("data", "done", "error", "leader_only", "on_done", "result")

    def __init__(self, data: bytes, leader_only: bool = False) -> None:
        self.data = data
        #: never forwarded: appended by this member as leader, or refused (NotLeader)
        self.leader_only = leader_only
        self.done = False
        self.result: object = None
        self.error: RaftError | None = None
        self.on_done: Callable[[Proposal], None] | None = None

    def _finish(self, result: object, error: RaftError | None) -> None:
        if self.done:
            return
        self.done = True
        self.result = result
        self.error = error
        if self.on_done is not None:
            self.on_done(self)


def encode_batch(items: list[bytes]) -> bytes:
    parts = [b"\x01", _U32.pack(len(items))]
    for it in items:
        parts.append(_U32.pack(len(it)))
        parts.append(it)
    return b"".join(parts)


def decode_batch(data: bytes) -> list[bytes]:
    if not data or data[0] != 1 or len(data) < 5:
        raise ValueError("not a batch")
    (n,) = _U32.unpack_from(data, 1)
    pos, out = 5, []
    for _ in range(n):
        (ln,) = _U32.unpack_from(data, pos)
        pos += 4
        if pos + ln > len(data):
            raise ValueError("truncated batch")
        out.append(data[pos : pos + ln])
        pos += ln
    if pos != len(data):
        raise ValueError("trailing bytes in batch")
    return out


@dataclass
class LeaderState:
    term: int
    leader_id: str | None
    is_leader: bool
