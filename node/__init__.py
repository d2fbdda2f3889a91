"""node: one server process — NATS on the wire.

The sans-IO protocol (``node/protocol``), subject validation and the sublist,
client sessions, core routing, monitoring, configuration and the composition
root (``node/__main__.py``).  May import ``cluster``, ``raft`` and ``store``.
"""
