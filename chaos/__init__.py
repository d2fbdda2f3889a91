"""chaos: break it and judge it.

Will hold the deterministic Raft simulator, fault-injecting links and proxies,
a process supervisor, client workloads with recorded histories, and checkers.
May import anything; nothing imports it.
"""
