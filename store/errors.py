"""Named errors of the store room.

Theory of operation
-------------------
Every failure a caller may need to branch on has its own class under
``StoreError``.  Limit rejections carry nats-server's wording and JetStream
``err_code`` so the API layer can answer clients without a lookup table of
its own; corruption carries where and what, so recovery and operators can act.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error the store raises."""


class InvariantViolation(StoreError):
    """A production invariant was broken (a bug, never bad input)."""


class StoreClosed(StoreError):
    """The store was closed; no operation is possible."""


class MsgNotFound(StoreError):
    """No live message at that sequence / for that subject (NATS 10037)."""


class StoreEOF(MsgNotFound):
    """The sequence is beyond ``last_seq`` (nats-server "stream store EOF")."""


class SequenceMismatch(StoreError):
    """An explicit sequence given to ``append`` is not ``last_seq + 1``."""

    def __init__(self, expected: int, got: int) -> None:
        super().__init__(f"expected sequence {expected}, got {got}")
        self.expected = expected
        self.got = got


class SnapshotError(StoreError):
    """A snapshot stream is malformed or fails its checksums."""


class CorruptionError(StoreError):
    """Stored bytes failed verification when read.

    Attributes:
        file: File the bad bytes are in.
        offset: Byte offset of the damage.
        seq: Sequence concerned (0 if unknown).
        reason: Short reason (``"crc"``, ``"decompress"``, ``"header"``...).
    """

    def __init__(self, file: str, offset: int, seq: int, reason: str) -> None:
        super().__init__(f"corrupt data in {file} at offset {offset} (seq {seq}): {reason}")
        self.file = file
        self.offset = offset
        self.seq = seq
        self.reason = reason


class LimitExceeded(StoreError):
    """A discard-new limit (or max_msg_size) rejected an append.

    ``description`` is nats-server's wording, ``err_code`` its JetStream code.
    """

    description = "limit exceeded"
    err_code = 10077

    def __init__(self) -> None:
        super().__init__(self.description)


class MaxMsgs(LimitExceeded):
    """``max_msgs`` reached under ``discard: new`` (503/10077)."""

    description = "maximum messages exceeded"


class MaxBytes(LimitExceeded):
    """``max_bytes`` would be exceeded under ``discard: new`` (503/10077)."""

    description = "maximum bytes exceeded"


class MaxMsgsPerSubject(LimitExceeded):
    """``max_msgs_per_subject`` reached with ``discard_new_per_subject`` (503/10077)."""

    description = "maximum messages per subject exceeded"


class MaxMsgSize(LimitExceeded):
    """Headers + payload larger than ``max_msg_size`` (400/10054)."""

    description = "message size exceeds maximum allowed"
    err_code = 10054
