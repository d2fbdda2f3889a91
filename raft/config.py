"""Tuning of one Raft group member (``RaftConfig``) and the pysyncobj
configuration it makes.  Every bound is named; the defaults suit loopback and LAN."""

from __future__ import annotations

from dataclasses import dataclass

from pysyncobj.config import SyncObjConf
from pysyncobj.journal import Journal

from raft.snapshot import SnapshotStore
from raft.syncobj import PATCHES

__all__ = ["RaftConfig"]


@dataclass
class RaftConfig:
    """Tuning of one group member. Every bound is named; defaults suit loopback/LAN."""

    election_timeout_s_min: float = 0.3
    election_timeout_s_max: float = 0.6
    heartbeat_s: float = 0.075
    # None: a leader announces a new commit index at once (an append-entries
    # per apply); else with the next entries or at most this much later
    commit_notify_s_max: float | None = None
    # None: a leader sends each new entry to every follower at once; else to
    # the followers a majority needs at once, the others at most this much
    # later, batched (raft.syncobj ``_SyncObj__sendAppendEntries``)
    lazy_follower_s: float | None = None
    leader_fallback_s: float | None = None  # None: election_timeout_s_min
    entry_bytes_max: int = 1024 * 1024  # one (batch) Raft entry
    batch_proposals_max: int = 4096
    proposals_pending_max: int = 20_000
    inbound_messages_max: int = 50_000
    commands_queue_max: int = 4096  # pysyncobj's queue (forwarded commands)
    entries_per_cycle_max: int = 256  # batch entries submitted per cycle
    send_bytes_per_cycle_max: int = 4 * 1024 * 1024  # per peer
    payload_bytes_max: int = 2 * 1024 * 1024  # per frame payload (< frame_bytes_max)
    log_compaction_entries_min: int = 100_000
    log_compaction_s_min: float = 24 * 3600.0
    snapshot_chunk_bytes: int = 256 * 1024
    forward_proposals: bool = True
    # a proposal forwarded to the leader whose answer (the log position it
    # took) has not come back this long is failed as maybe committed: the
    # request or its answer was lost (a full link queue drops frames) and
    # pysyncobj would wait for it until the next leader change
    forward_reply_s_max: float = 2.0
    # a forwarded proposal whose answer was lost is looked for in the applied
    # log this long at most (``RaftCore._watch_applied``)
    watch_s_max: float = 10.0
    # None: heartbeat forever; else an idle group hibernates after this long
    # (raft.quiet; needs peer links that report link events, raft.liveness)
    quiet_after_s: float | None = None
    # a leader's append-entries leave before its own fsync (safe: see Ready)
    send_append_entries_before_fsync: bool = True
    # a leader's driver goes on cycling while its journal write is in flight:
    # the followers' acknowledgements may commit without it (raft.driver; off:
    # no gain measured on a loaded two-core machine, see bench/README.md)
    leader_write_overlap: bool = False
    # False: interval mode (the user's sync_interval): log appends are written,
    # not fsynced, until the owner calls ``RaftGroup.sync_journal``
    # (raft.journal); term/vote records are always fsynced
    journal_fsync: bool = True
    # a frame reaching a parked driver is handled at once in the link reader's
    # task (``RaftDriver._fast_cycle``): one task hop less on each side of a
    # replicated write; the cycle's journal write is done there too when it
    # is at most ``inline_write_bytes_max`` (a lone small entry: the sync
    # thread's hand-over costs more than the fsync blocks the event loop),
    # else by the driver in its sync thread (bench/README.md, branch r3sync11)
    fast_lane: bool = True
    inline_write_bytes_max: int = 2048
    patches: frozenset[str] = PATCHES

    @property
    def proposal_bytes_max(self) -> int:
        return self.entry_bytes_max - 16

    def syncobj_conf(self, journal: Journal, store: SnapshotStore) -> SyncObjConf:
        fallback = self.leader_fallback_s
        if fallback is None:
            fallback = self.election_timeout_s_min if "fallback" in self.patches else 30.0
        return SyncObjConf(
            autoTick=False,
            useFork=False,
            dynamicMembershipChange=True,
            pollerType="trijet-none",
            appendEntriesUseBatch=False,
            commandsWaitLeader=False,
            raftMinTimeout=self.election_timeout_s_min,
            raftMaxTimeout=self.election_timeout_s_max,
            appendEntriesPeriod=self.heartbeat_s,
            leaderFallbackTimeout=fallback,
            connectionTimeout=max(3.5, self.election_timeout_s_max),
            appendEntriesBatchSizeBytes=self.entry_bytes_max + 1,
            commandsQueueSize=self.commands_queue_max,
            logCompactionMinEntries=self.log_compaction_entries_min,
            logCompactionMinTime=self.log_compaction_s_min,
            logCompactionBatchSize=self.snapshot_chunk_bytes,
            journalFile=journal,
            fullDumpFile=store.name,
            serializer=store.write_hook,
            deserializer=store.read_hook,
        )
