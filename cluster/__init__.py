"""cluster: what is replicated, and where.

Will hold the pure meta, stream and consumer state machines (``meta.py``,
``stream_fsm.py``, ``consumer_fsm.py``), placement, the replicated op codes and
model, the trio controller that performs their effects, and ``api.py`` — the
facade ``node/`` calls for everything JetStream.  Imports ``raft`` and
``store`` only; never ``node``.
"""
