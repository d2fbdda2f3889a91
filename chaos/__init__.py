"""chaos: break it and judge it.

Two halves.  The deterministic Raft simulator (``sim``, ``net``, ``raftnode``, ``toyfsm``,
``procs``; ``python -m chaos.sim --seeds 200``).  And failover drills on real three-node clusters
(``python -m chaos run|list|report|campaign``): ``supervisor`` (processes), ``proxy`` (faults on
route links), ``powerloss`` (a FUSE file system that forgets unsynced writes), ``workload`` and
``history`` (nats-py clients, JSON-lines histories), ``nemesis`` (fault scenarios), ``readback``
(each node's own replica), ``checkers/`` (one property each), ``run``, ``report``, ``campaign``.
May import anything; nothing imports it.
"""
