"""store.file: the durable stream store (segments, records, index, recovery).

See ``store.file.store`` for the theory of operation.
"""

from store.file.store import FileStreamStore

__all__ = ["FileStreamStore"]
