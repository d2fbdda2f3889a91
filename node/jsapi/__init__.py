"""JetStream API (``$JS.API.*``): request schemas, validation, errors, response rendering.

Pure modules (no I/O): ``errors`` (the err_code catalogue), ``streamconfig``
(STREAM.CREATE/UPDATE parsing, normalisation and validation as nats-server
does it), ``render`` (response JSON byte-for-byte as nats-server writes it).
"""
