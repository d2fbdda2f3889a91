"""``ReplicaSpec``: where a replicated stream's group runs, apart from the group itself.

A standalone server names the type (the stream registry's and the meta
layer's signatures) but never runs a Raft group: this module keeps it from
importing ``cluster.replicated`` and the Raft stack under it (pysyncobj).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raft.links import PeerLinks

#: the journal of a stream group (file store) is compacted past these bounds
JOURNAL_ENTRIES_MAX = 50_000
JOURNAL_BYTES_MAX = 64 * 1024 * 1024


@dataclass(frozen=True)
class ReplicaSpec:
    """Where a replicated stream's group runs (from its meta assignment).

    Attributes:
        group_id: the Raft group name (``S-R3F-…``).
        node_id: this server's name.
        peers: every member's server name.
        links: the server's peer links.
        seed: seeds the group's election timeouts.
        journal_entries_max, journal_bytes_max: compaction bounds.
        first_candidate: set only when the group is created (see raft.core).
    """

    group_id: str
    node_id: str
    peers: tuple[str, ...]
    links: PeerLinks
    seed: int = 0
    journal_entries_max: int = JOURNAL_ENTRIES_MAX
    journal_bytes_max: int = JOURNAL_BYTES_MAX
    #: the leader's journal write overlaps its next cycles (raft.driver)
    leader_write_overlap: bool = False
    #: a brand-new group's member that stands for election at once (raft.core)
    first_candidate: str | None = None
