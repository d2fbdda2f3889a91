"""Placement: which servers host a new asset, and who takes over on a stepdown.

Theory of operation
-------------------
This module is pure: it takes what the meta state machine knows of the
JetStream servers (``PeerSpec``: name, cluster, tags, online, load) and a
request, and returns peer names or the reference's reason.  It reads no clock,
imports neither trio nor sockets, and draws its only randomness from the
``random.Random`` it is given, so it can run inside the meta group's
deterministic ``apply`` with an RNG seeded from replicated data: every replica
computes the same answer (given the same Python: ``random.shuffle`` and
``random.choice`` are the only draws).  The order of ``peers`` does not matter
(they are sorted by name first).

``place`` ranks the peers once, then takes them in order:

1. Rank: sort by name, shuffle with ``rng`` (ties are broken at random, as
   nats-server shuffles its peer list), then sort stably by ``load``, least
   loaded first.  The first name returned is the preferred initial leader.
   Because the caller counts a new asset into ``load``, successive creates
   land on different servers (spread).
2. Filter each peer, recording why it was passed over, in the reference's
   order of checks: offline (``miscellaneous issue``); other cluster (no
   reason recorded, so an unknown cluster yields the bare message); the server
   tag ``!jetstream`` (``exclude tag set``); the request's tags, all of which
   must match, case-insensitively, where a tag written ``!x`` must *not* be
   present (the first failing tag per peer is recorded under
   ``tags not matched`` / ``tags excluded``); finally the unique tag: with
   ``unique_tag`` set (e.g. ``"az:"``) each chosen peer must carry a tag with
   that prefix whose value no earlier chosen peer carries
   (``server tag not unique``).  If a request tag itself starts with the
   prefix, that dimension is pinned by the request and uniqueness is not
   enforced (reference §2.2).
3. Fewer eligible peers than ``replicas``: ``NoPlacement`` whose description
   is ``no suitable peers for placement`` followed by every recorded reason,
   joined by ``, `` in the reference's fixed clause order (see
   ``_Reasons.describe``).  Reasons are only ever reported on failure, and a
   request that simply asks for more replicas than there are servers gets the
   bare message.

The reference records ``miscellaneous issue`` for a server it holds no
information about, which is how a killed server shows; trijet marks such
a server ``online=False`` and records the same clause for it, whatever
cluster or tags were requested.  ``cluster=None`` means any cluster: trijet
runs one cluster, so there is no client-origin cluster to default to.

``stepdown_target`` chooses the next leader for a stepdown request with a
``placement`` body (reference §4.1, §4.2): a preferred server must be a member
and not the leader; otherwise cluster and tags filter the online members other
than the leader, and one is drawn with ``rng``.  No constraints at all returns
``None``: the caller lets any current member win the election.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

NO_PEERS_MESSAGE = "no suitable peers for placement"
"""The start of every 400/10005 placement failure."""

EXCLUDE_PLACEMENT_TAG = "!jetstream"
"""A server carrying this tag in ``server_tags`` never receives assets."""

EXCLUDE_PREFIX = "!"
"""A request tag starting with this must be absent from the server."""


@dataclass(frozen=True, slots=True)
class PeerSpec:
    """What placement knows of one JetStream server.

    Attributes:
        name: the server's ``server_name``.
        cluster: its cluster name.
        tags: its ``server_tags`` as configured.
        online: whether the meta layer currently hears from it.
        load: assets (stream and consumer groups) it hosts now; least loaded
            is preferred.
    """

    name: str
    cluster: str
    tags: tuple[str, ...]
    online: bool
    load: int


@dataclass(frozen=True, slots=True)
class PlacementRequest:
    """An asset's placement needs.

    Attributes:
        replicas: number of peers wanted (already normalised: 0 became 1).
        cluster: ``placement.cluster``; None (or empty) places in any cluster.
        tags: ``placement.tags``; each must match (``!x``: must not match).
    """

    replicas: int
    cluster: str | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NoPlacement:
    """Placement is impossible; answered as 400/10005 with this description.

    Attributes:
        description: the reference's exact text, e.g.
            ``no suitable peers for placement, tags not matched ['ssd']``.
    """

    description: str


@dataclass(slots=True)
class _Reasons:
    """Why peers were passed over, accumulated during one scan."""

    exclude_tag: bool = False
    unique_tag: bool = False
    misc: bool = False
    no_js_cluster: bool = False
    not_matched: set[str] = field(default_factory=set)
    excluded: set[str] = field(default_factory=set)

    def describe(self, tag_order: Sequence[str]) -> str:
        """The 10005 description, clauses in the reference's order.

        Args:
            tag_order: the request's tags (``!`` stripped), which order the
                tags inside the two tag clauses.
        """
        parts = [NO_PEERS_MESSAGE]
        if self.exclude_tag:
            parts.append("exclude tag set")
        if self.unique_tag:
            parts.append("server tag not unique")
        if self.misc:
            parts.append("miscellaneous issue")
        if self.no_js_cluster:
            parts.append("jetstream not enabled in cluster")
        if self.not_matched:
            parts.append(f"tags not matched [{_quoted(tag_order, self.not_matched)}]")
        if self.excluded:
            parts.append(f"tags excluded [{_quoted(tag_order, self.excluded)}]")
        return ", ".join(parts)


def _quoted(order: Sequence[str], tags: set[str]) -> str:
    ranked = sorted(tags, key=lambda t: (order.index(t) if t in order else len(order), t))
    return ", ".join(f"'{t}'" for t in ranked)


def _has_tag(peer: PeerSpec, tag: str) -> bool:
    want = tag.lower()
    return any(t.lower() == want for t in peer.tags)


def _unique_value(peer: PeerSpec, prefix: str) -> str | None:
    """The peer's first tag starting with ``prefix`` (lower-cased), if any."""
    low = prefix.lower()
    for t in peer.tags:
        if t.lower().startswith(low):
            return t.lower()
    return None


def _split_tags(tags: Sequence[str]) -> list[tuple[str, bool]]:
    """``(tag, exclude)`` per request tag, the ``!`` stripped."""
    return [
        (t[len(EXCLUDE_PREFIX) :], True) if t.startswith(EXCLUDE_PREFIX) else (t, False)
        for t in tags
    ]


def rank(peers: Sequence[PeerSpec], rng: random.Random) -> list[PeerSpec]:
    """Least loaded first; equal loads in an order drawn from ``rng``.

    Args:
        peers: the servers, in any order.
        rng: consumed by exactly one shuffle of ``len(peers)`` items.

    Returns:
        A new list; deterministic for a given ``rng`` state and peer set.
    """
    ordered = sorted(peers, key=lambda p: p.name)
    rng.shuffle(ordered)
    ordered.sort(key=lambda p: p.load)
    return ordered


def place(
    req: PlacementRequest,
    peers: Sequence[PeerSpec],
    *,
    unique_tag: str,
    rng: random.Random,
    keep: Sequence[PeerSpec] = (),
) -> tuple[str, ...] | NoPlacement:
    """Choose the servers for a new asset's group (or new members for one).

    Args:
        req: replicas, cluster and tags asked for.
        peers: every JetStream server the meta layer knows, online or not.
        unique_tag: the ``jetstream.unique_tag`` prefix (``""``: none).
        rng: seeded from replicated data when run in ``apply``.
        keep: members the group keeps (a peer replaced by PEER.REMOVE): they
            are never chosen again, and their unique-tag values count as taken.

    Returns:
        ``req.replicas`` distinct names, least loaded first (the first is the
        preferred initial leader), or ``NoPlacement`` with the reference's
        400/10005 description.

    Raises:
        ValueError: ``req.replicas`` is below 1 (the caller normalises 0).
    """
    if req.replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {req.replicas}")
    wanted = _split_tags(req.tags)
    prefix = unique_tag
    if prefix and any(t.lower().startswith(prefix.lower()) for t, _ in wanted):
        prefix = ""  # the request pins the unique dimension itself
    reasons = _Reasons(no_js_cluster=not peers)
    chosen: list[str] = []
    taken: set[str] = set()
    kept = {p.name for p in keep}
    if prefix:
        taken.update(v for p in keep if (v := _unique_value(p, prefix)) is not None)
    for peer in rank(peers, rng):
        if peer.name in kept:
            continue
        if not peer.online:
            reasons.misc = True
            continue
        if req.cluster and peer.cluster != req.cluster:
            continue
        if _has_tag(peer, EXCLUDE_PLACEMENT_TAG):
            reasons.exclude_tag = True
            continue
        if not _tags_fit(peer, wanted, reasons):
            continue
        if prefix:
            value = _unique_value(peer, prefix)
            if value is None or value in taken:
                reasons.unique_tag = True
                continue
            taken.add(value)
        chosen.append(peer.name)
    if len(chosen) < req.replicas:
        return NoPlacement(reasons.describe([t for t, _ in wanted]))
    return tuple(chosen[: req.replicas])


def _tags_fit(peer: PeerSpec, wanted: Sequence[tuple[str, bool]], reasons: _Reasons) -> bool:
    """Whether ``peer`` satisfies every request tag; records the first miss."""
    for tag, exclude in wanted:
        present = _has_tag(peer, tag)
        if exclude and present:
            reasons.excluded.add(tag)
            return False
        if not exclude and not present:
            reasons.not_matched.add(tag)
            return False
    return True


def stepdown_target(
    current_leader: str,
    members: Sequence[PeerSpec],
    *,
    preferred: str | None,
    cluster: str | None,
    tags: tuple[str, ...],
    rng: random.Random,
) -> str | NoPlacement | None:
    """The next leader for a stepdown request's ``placement`` (reference §4.1/§4.2).

    A preferred server takes precedence over cluster and tags.  Otherwise
    the online members other than the leader that are in ``cluster`` (if
    given) and carry every tag in ``tags`` (case-insensitive) are candidates,
    and one is drawn with ``rng``.

    Args:
        current_leader: the group's leader now (server name).
        members: the group's peers, the leader included.
        preferred: ``placement.preferred``.
        cluster: ``placement.cluster``.
        tags: ``placement.tags``.
        rng: used only to draw among several candidates.

    Returns:
        A member's name; ``None`` when there are no constraints (any other
        current member may win); or ``NoPlacement`` with
        ``preferred server "X" is already leader``,
        ``preferred server "X" not known`` or ``no replacement peer connected``.
    """
    if preferred:
        if preferred == current_leader:
            return NoPlacement(f'preferred server "{preferred}" is already leader')
        if all(m.name != preferred for m in members):
            return NoPlacement(f'preferred server "{preferred}" not known')
        return preferred
    if not cluster and not tags:
        return None
    candidates = sorted(
        m.name
        for m in members
        if m.online
        and m.name != current_leader
        and (not cluster or m.cluster == cluster)
        and all(_has_tag(m, t) for t in tags)
    )
    if not candidates:
        return NoPlacement("no replacement peer connected")
    return rng.choice(candidates)
