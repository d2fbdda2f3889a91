"""raft: pysyncobj as a trio service.

Will hold ``RaftGroup`` (propose / leadership), the single-owner driver of a
``SyncObj``, an outbox transport, the cbor2 frame codec and authenticated peer
links.  Knows nothing of streams and imports nothing else of trijet.
"""
