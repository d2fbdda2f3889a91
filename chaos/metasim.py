"""The meta group's real state machine under the deterministic Raft simulator.

Theory of operation
-------------------
:class:`MetaSimulation` is :class:`chaos.sim.Simulation` with the replicated
state machine swapped for ``cluster.meta.MetaMachine`` and the toy workload
for the meta leader's: peer registrations, stream creates (placement decided
in apply from the entry's seed, online set and ``unique_tag``), updates,
deletes and a few malformed entries.  Requests are proposed at the current
leader, one at a time (``JetStreamService`` awaits each request's proposal
before the next; a crash of the proposer or ``REQUEST_TIMEOUT_S`` frees the
loop), each validated as ``node.jetstream.clustered`` does against the
proposer's applied state; registrations come from any member (forwarded by
pysyncobj, idempotent).  ``forward_share`` > 0 also proposes requests at
followers: pysyncobj forwards commands without a request id, so a frame the
simulated network duplicates is appended twice and the checks below report
it — the reason the meta layer proposes requests on the leader only (TCP
links do not duplicate frames).  The simulator's faults are unchanged: crashes (also mid-cycle,
losing un-synced journal records), restarts from durable state, partitions,
drops, duplicates, reordering, leadership transfers and forced log compaction
(snapshots taken and installed), so members rebuild the meta state from
``restore`` + replay as a restarted server does.

Every entry carries a unique reply subject (or a unique prefix), so an entry
is one client request.  Checks, besides the simulator's Raft safety checks:

* **one outcome per entry** — each member that applies an entry, at any
  time (first apply, replay after a restart, catch-up after a snapshot),
  gets the same result and emits the same effects; the proposer's result
  equals it.  An entry committed twice (a duplicated forward) shows here,
  as a create answered both ``created`` and not, or a delete both
  ``Removed`` and 10059.
* **state machine safety** — members at the same applied index hold the same
  ``snapshot()`` bytes (compared as a digest).
* **convergence** — after the network heals and everyone restarts, members
  that applied the same index agree byte for byte; lagging members are
  reported as liveness, not safety, as in the simulator.
* **well-formed state** — every assigned peer is a registered server, each
  stream has as many peers as replicas, group names are unique, and no
  well-formed workload entry was answered ``BAD_ENTRY``; ``apply`` never
  raises.

CLI: ``python -m chaos.sim --workload meta --seeds 200``; one seed replays
with ``python -m chaos.sim --workload meta --seed N``.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any, BinaryIO

from chaos.sim import SimConfig, Simulation
from cluster.meta.entries import (
    BAD_ENTRY,
    Effect,
    PeerRecord,
    add_stream_entry,
    delete_stream_entry,
    peer_entry,
    scale_fields,
    update_stream_entry,
)
from cluster.meta.machine import (
    MetaMachine,
)
from raft.core import RaftCore
from raft.errors import RaftError
from raft.fsm import StateMachine
from raft.proposal import Proposal

__all__ = ["MetaSimulation", "RecordingMetaMachine"]

STREAM_NAMES = tuple(f"S{i}" for i in range(8))
SERVER_TAGS = ("ssd", "az:1", "az:2", "az:3")
#: at most this many proposals in one client burst
BURST_MAX = 6
#: the API loop gives up waiting for a proposal after this long (sim time)
REQUEST_TIMEOUT_S = 1.0


class RecordingMetaMachine:
    """A ``MetaMachine`` that reports every apply's outcome to the simulation.

    The outcome of an entry is its result plus the effects it emitted; the
    listener is always set, as on a running server.  ``digest`` is the
    snapshot's hash, recomputed only after the state changed.
    """

    def __init__(self, sim: MetaSimulation, nid: str) -> None:
        self.sim = sim
        self.nid = nid
        self.machine = MetaMachine()
        self._effects: list[Effect] = []
        self.machine.listener = self._effects.append
        self._digest: bytes | None = None

    def apply(self, entry: bytes) -> object:
        self._effects.clear()
        self._digest = None
        try:
            result = self.machine.apply(entry)
        except Exception as e:
            self.sim.violation(f"apply raised on {self.nid}: {e!r} entry={entry[:40]!r}")
            raise
        self.sim.outcome(self.nid, entry, result, tuple(self._effects))
        return result

    def snapshot(self) -> bytes:
        return self.machine.snapshot()

    def restore(self, reader: BinaryIO) -> None:
        self._digest = None
        self.machine.restore(reader)

    @property
    def digest(self) -> bytes:
        if self._digest is None:
            self._digest = hashlib.blake2b(self.machine.snapshot(), digest_size=16).digest()
        return self._digest


class MetaSimulation(Simulation):
    """One seeded run of the meta group (see the module docstring)."""

    def __init__(self, seed: int, cfg: SimConfig | None = None) -> None:
        #: entry -> (first member that applied it, result, effects)
        self.outcomes: dict[bytes, tuple[str, object, tuple[Effect, ...]]] = {}
        #: entries the workload meant to be well formed
        self.well_formed: set[bytes] = set()
        self.requests = 0
        self._starting = "?"
        #: share of create/update/delete proposed at a random member rather
        #: than the leader (forwarded by pysyncobj; see the module docstring)
        self.forward_share = 0.0
        self.inflight: tuple[RaftCore, Proposal, float] | None = None
        super().__init__(seed, cfg)
        #: scaling choices (a stream of its own: the other requests stay as they were)
        self.scale_rng = random.Random(f"scale-{seed}")

    # ------------------------------------------------------------ hooks

    def new_fsm(self) -> StateMachine:
        return RecordingMetaMachine(self, self._starting)

    def start(self, nid: str) -> None:
        self._starting = nid  # the member replays its journal while it is built
        super().start(nid)

    def fsm_state(self, core: RaftCore) -> object:
        fsm = core.fsm
        assert isinstance(fsm, RecordingMetaMachine)
        return fsm.digest

    def outcome(self, nid: str, entry: bytes, result: object, effects: tuple[Effect, ...]) -> None:
        """Called on every apply, on every member."""
        seen = self.outcomes.setdefault(entry, (nid, result, effects))
        if seen[1:] != (result, effects):
            self.violation(
                f"two outcomes for one entry: {seen[0]} got {seen[1]!r:.120} "
                f"{len(seen[2])} effects, {nid} got {result!r:.120} {len(effects)} effects "
                f"(entry {entry[:60]!r})"
            )
        if result == BAD_ENTRY and entry in self.well_formed:
            self.violation(f"well-formed entry answered BAD_ENTRY on {nid}: {entry[:60]!r}")

    # ------------------------------------------------------------ workload

    def client(self) -> None:
        up = self.up()
        if not up:
            return
        r = self.client_rng
        n = 1 if r.random() < 0.8 else r.randint(2, BURST_MAX)
        online = [nid for nid, _ in up]
        for _ in range(n):
            leader = self.leader()
            request = False
            if r.random() < 0.12:  # a server registers itself, leader or not
                nid, core = up[r.randrange(len(up))]
                tags = tuple(sorted(r.sample(SERVER_TAGS, r.randint(0, 2))))
                entry = peer_entry(PeerRecord(nid, "C1", tags))  # idempotent
            elif self._busy():
                continue
            elif leader is not None and r.random() >= self.forward_share:
                core, request = leader, True
                entry = self._request(core, online)
            else:
                core, request = up[r.randrange(len(up))][1], True
                entry = self._request(core, online)
            try:
                p = core.propose(entry)
            except RaftError:
                continue
            p.on_done = self._on_done
            if request:
                self.inflight = (core, p, self.t + REQUEST_TIMEOUT_S)

    def _busy(self) -> bool:
        """Whether the API loop still awaits its last proposal (one at a time,
        as ``JetStreamService`` handles requests; a crash or timeout frees it)."""
        if self.inflight is None:
            return False
        core, p, deadline = self.inflight
        if p.done or self.cores.get(core.node_id) is not core or self.t >= deadline:
            self.inflight = None
            return False
        return True

    def _request(self, proposer: RaftCore, online: list[str]) -> bytes:
        """One client request as the meta leader proposes it, unique by its
        reply subject; updates start from the proposer's view of the stream."""
        r = self.client_rng
        self.requests += 1
        reply = f"_INBOX.{self.seed}.{self.requests}"
        kind = r.random()
        if kind < 0.04:  # garbage: a prefix keeps it unique
            return b"\xff" + self.requests.to_bytes(4, "big") + r.randbytes(r.randint(0, 24))
        if kind < 0.6:
            entry = add_stream_entry(
                self._config(),
                group=f"S-R1F-{self.seed:x}{self.requests:06x}",
                created_ns=int(self.t * 1e9),
                seed=r.getrandbits(63),
                online=r.sample(online, r.randint(max(0, len(online) - 1), len(online))),
                unique_tag=r.choice(("", "", "az:")),
                reply=reply,
            )
        elif kind < 0.8:
            cfg = self._config()
            fsm = proposer.fsm
            assert isinstance(fsm, RecordingMetaMachine)
            seen = fsm.machine.stream(cfg["name"])
            scale = None
            if seen is not None:  # the proposer validated: same placement
                cfg.pop("placement", None)
                if "placement" in seen.config:
                    cfg["placement"] = seen.config["placement"]
                if cfg["num_replicas"] == (seen.config.get("num_replicas") or 1):
                    pass
                elif self.scale_rng.random() < 0.5:  # a scale, with the proposer's view
                    sr = self.scale_rng
                    scale = scale_fields(
                        group=f"S-R3F-{self.seed:x}{self.requests:06x}",
                        seed=sr.getrandbits(63),
                        online=sr.sample(online, sr.randint(max(0, len(online) - 1), len(online))),
                        unique_tag=sr.choice(("", "", "az:")),
                        leader=sr.choice([*seen.peers, ""]),
                    )
                else:
                    cfg["num_replicas"] = seen.config.get("num_replicas")
            entry = update_stream_entry(cfg, reply=reply, scale=scale)
        else:
            entry = delete_stream_entry(r.choice(STREAM_NAMES), reply=reply)
        self.well_formed.add(entry)
        return entry

    def _config(self) -> dict[str, Any]:
        r = self.client_rng
        name = r.choice(STREAM_NAMES)
        cfg: dict[str, Any] = {
            "name": name,
            "subjects": [f"{name.lower()}.{r.choice('ab')}"],
            "num_replicas": r.choice((1, 1, 1, 2, 3)),
        }
        if r.random() < 0.3:
            cfg["placement"] = {"tags": r.sample(SERVER_TAGS, r.randint(1, 2))}
        if r.random() < 0.3:
            cfg["max_msgs"] = r.choice((10, 100))
        return cfg

    def _on_done(self, p: Proposal) -> None:
        if p.error is not None:
            return
        self.acked[p.data] = len(self.acked) + 1
        seen = self.outcomes.get(p.data)
        if seen is None:
            self.violation(f"acknowledged entry never applied: {p.data[:60]!r}")
        elif seen[1] != p.result:
            self.violation(
                f"proposer got {p.result!r:.120}, {seen[0]} applied {seen[1]!r:.120} "
                f"(entry {p.data[:60]!r})"
            )

    # ------------------------------------------------------------ end checks

    def final_checks(self) -> None:
        up = self.up()
        best_core = max(up, key=lambda ic: ic[1].last_applied)[1]
        best = best_core.fsm
        assert isinstance(best, RecordingMetaMachine)
        for nid, core in up:
            fsm = core.fsm
            assert isinstance(fsm, RecordingMetaMachine)
            if core.last_applied != best_core.last_applied:
                self.result.liveness.append(
                    f"{nid} applied {core.last_applied} != {best_core.last_applied} after settling"
                )
            elif fsm.machine.snapshot() != best.machine.snapshot():
                self.violation(f"{nid} and {best_core.node_id} applied as much but differ")
        self._check_state(best.machine)
        self.result.acked = len(self.acked)
        self.result.counts["quiesced"] = self.quiesced
        self.result.snapshots = sum(c.snapshots.taken + c.snapshots.installed for _, c in up)

    def _check_state(self, m: MetaMachine) -> None:
        groups: set[str] = set()
        for name, sa in m.streams.items():
            replicas = sa.config.get("num_replicas") or 1
            if sa.key != name or len(sa.peers) != replicas or len(set(sa.peers)) != replicas:
                self.violation(f"stream {name}: {len(sa.peers)} peers for R{replicas}: {sa}")
            if len(sa.peers) > 1 and not sa.replicated:
                self.violation(f"stream {name}: {len(sa.peers)} peers without a Raft group")
            if not set(sa.joiners) <= set(sa.peers):
                self.violation(f"stream {name}: joiners {sa.joiners} not among {sa.peers}")
            if not set(sa.peers) <= set(m.peers):
                self.violation(f"stream {name} placed on unknown servers {sa.peers}")
            if sa.group in groups:
                self.violation(f"stream {name}: group {sa.group} used twice")
            groups.add(sa.group)
