"""What every replicated op shares: op codes, errors and field checks.

Theory of operation
-------------------
Stream ops (``cluster.ops``) and consumer ops (``cluster.consumer_ops``)
travel in the same Raft entries and share one code space and one rule: an
op is checked completely when it is built, so ``decode_any`` (which builds
ops from decoded cbor) can only return valid ops or raise ``OpDecodeError``.
The checks here are strict on type (a bool is not an int; a bytearray is
not bytes), because a wrong type is a wrong encoding.

``OpCode`` is the register of op codes: an ``IntEnum`` with explicit
values, append only, never renumbered or reused.  1..31 are stream ops,
32..63 consumer ops.  Pure: no I/O.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = [
    "INT64_MAX",
    "UINT64_MAX",
    "OpCode",
    "OpDecodeError",
    "OpError",
    "check_array",
    "check_bool",
    "check_bytes",
    "check_int",
    "check_opt_int",
    "check_str",
]

INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


class OpError(ValueError):
    """An op was built with invalid fields."""


class OpDecodeError(OpError):
    """Bytes are not a valid encoded op (the only error ``decode_op`` raises)."""


class OpCode(enum.IntEnum):
    """Replicated op codes.  Append only; never renumber or reuse a value."""

    STREAM_MSG = 1
    PURGE = 2
    DELETE_MSG = 3
    UPDATE_POLICY = 4
    EXPIRE = 5
    MIRROR_MSG = 6
    SOURCED_MSG = 7
    ACK_REMOVE = 8
    INTEREST = 9
    # 6..31: future stream ops.  32..63: consumer ops.
    CONSUMER_CREATED = 32
    CONSUMER_POLICY = 33
    CONSUMER_DELIVERED = 34
    CONSUMER_ACKS = 35
    CONSUMER_TIMEOUTS = 36
    CONSUMER_STREAM_FIRST = 37
    CONSUMER_ACKED = 38
    # a consumer's life in its stream's group (replicated streams)
    CONSUMER_ASSIGN = 39
    CONSUMER_REMOVE = 40


def check_int(name: str, v: object, lo: int, hi: int) -> int:
    # bool is an int subclass; a bool where an int belongs is a bad encoding.
    if type(v) is not int:
        raise OpError(f"{name} must be an int, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise OpError(f"{name} out of range: {v}")
    return v


def check_opt_int(name: str, v: object, lo: int, hi: int) -> int | None:
    return None if v is None else check_int(name, v, lo, hi)


def check_bool(name: str, v: object) -> bool:
    if type(v) is not bool:
        raise OpError(f"{name} must be a bool, got {type(v).__name__}")
    return v


def check_str(name: str, v: object, *, empty_ok: bool = False) -> str:
    if type(v) is not str:
        raise OpError(f"{name} must be a str, got {type(v).__name__}")
    if not v and not empty_ok:
        raise OpError(f"{name} must not be empty")
    return v


def check_bytes(name: str, v: object) -> bytes:
    if type(v) is not bytes:
        raise OpError(f"{name} must be bytes, got {type(v).__name__}")
    return v


def check_array(name: str, v: object, n: int) -> list[Any]:
    if type(v) is not list or len(v) != n:
        raise OpError(f"{name} must be an array of {n}")
    return v
