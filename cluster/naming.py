"""Names the reference gives to peers and Raft groups (reference §10).

Theory of operation: a peer id is a pure function of the server name (the
first 8 bytes of its SHA-256, each byte mod 62 indexing ``0-9A-Za-z``), so
every node derives every other node's id without asking, and ids match
nats-server's (``n1`` -> ``fjFyEjc1``).  A group name is
``<S|C>-R<replicas><F|M>-<8 of [A-Za-z0-9]>``; the random part is drawn from
the ``random.Random`` the caller passes, which inside the meta group's
``apply`` is seeded from replicated data, so all replicas name a new group
alike.  Group names are fixed when a group is created and never reused
(``_meta_`` is the meta group's).  Pure: no clock, no I/O.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Collection
from typing import Literal

ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
"""The 62 characters of peer ids and group name suffixes."""

PEER_ID_CHARS = 8
GROUP_SUFFIX_CHARS = 8
META_GROUP = "_meta_"
"""The meta group's name."""


def peer_id(server_name: str) -> str:
    """The 8-character peer id nats-server derives from a server name.

    Args:
        server_name: the server's ``server_name``.

    Returns:
        e.g. ``"fjFyEjc1"`` for ``"n1"``.
    """
    digest = hashlib.sha256(server_name.encode()).digest()
    return "".join(ALPHABET[b % len(ALPHABET)] for b in digest[:PEER_ID_CHARS])


def group_name(
    kind: Literal["S", "C"], replicas: int, storage_file: bool, rng: random.Random
) -> str:
    """A new Raft group name shaped like the reference's, e.g. ``S-R3F-e1IXZwFV``.

    Args:
        kind: ``"S"`` for a stream's group, ``"C"`` for a consumer's.
        replicas: the group's size (1 or more).
        storage_file: file storage (``F``) or memory (``M``).
        rng: draws the 8-character suffix.

    Returns:
        The name.

    Raises:
        ValueError: ``kind`` is not S or C, or ``replicas`` is below 1.
    """
    if kind not in ("S", "C"):
        raise ValueError(f"group kind must be 'S' or 'C', got {kind!r}")
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    suffix = "".join(rng.choice(ALPHABET) for _ in range(GROUP_SUFFIX_CHARS))
    return f"{kind}-R{replicas}{'F' if storage_file else 'M'}-{suffix}"


#: bound on drawing a group name not in use
GROUP_DRAWS_MAX = 16


def fresh_group_name(
    kind: Literal["S", "C"],
    replicas: int,
    storage_file: bool,
    rng: random.Random,
    used: Collection[str],
) -> str:
    """A new group name as ``group_name`` draws it, drawn again while it is in
    ``used`` (groups of every account share the servers' peer links; at most
    ``GROUP_DRAWS_MAX`` draws: 62**8 names make a second draw already rare)."""
    name = group_name(kind, replicas, storage_file, rng)
    for _ in range(GROUP_DRAWS_MAX):
        if name not in used:
            break
        name = group_name(kind, replicas, storage_file, rng)
    return name
