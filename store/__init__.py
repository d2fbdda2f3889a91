"""store: bytes kept safe.

Will hold the ``StreamStore`` / ``ConsumerStore`` protocols, the memory and
file stores, and pure retention/discard decisions.  A leaf: imports nothing
else of trijet.
"""
