"""Damaged stream and consumer directories, set aside at start.

Theory of operation: one damaged asset must not stop the server.  When a
stream's or a consumer's directory cannot be recovered (its ``config.json``
unreadable, not JSON, not a valid config; its store refusing to open), the
directory is renamed — never deleted — to
``<store_dir>/quarantine/<kind>s/<name>.<unix ns>`` (a consumer's name is
``<stream>.<consumer>``), a warning names the path and the reason, and the
rest is served.  An operator inspects the copy, then removes it or moves it
back.

``Quarantine.found`` lists what lies in the quarantine directory (from this
start or an earlier one): nats-server's ``/healthz`` keeps failing while a
stream cannot be recovered (``JetStream stream '$G > S' could not be
recovered``), and so does ours while a quarantined stream is there; a
consumer that could not be recovered does not fail it (nats-server logs it
and reports healthy), here neither.

Blocking file I/O: callers run these in ``trio.to_thread``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

QUARANTINE_DIR = "quarantine"


@dataclass(frozen=True, slots=True)
class Quarantined:
    """One directory set aside: ``kind`` ``stream``/``consumer``, the asset
    ``name`` (a consumer's is ``stream > consumer``) and where it now lies."""

    kind: str
    name: str
    path: Path


class Quarantine:
    """Where damaged directories go, under ``store_dir``."""

    def __init__(self, store_dir: Path) -> None:
        self.root = store_dir / QUARANTINE_DIR

    def put(self, kind: str, name: str, path: Path, reason: str) -> Path | None:
        """Rename ``path`` aside and log it (with ``reason``).

        Returns:
            The new path, or None when the rename failed (also logged; the
            directory is then left where it was and skipped).
        """
        dest = self.root / f"{kind}s" / f"{name}.{time.time_ns()}"
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, dest)
        except OSError as exc:
            log.error(
                "event=%s_unrecoverable path=%s reason=%r quarantine_failed=%r",
                kind,
                path,
                reason,
                str(exc),
            )
            return None
        log.warning(
            "event=%s_quarantined %s=%s path=%s moved_to=%s reason=%r",
            kind,
            kind,
            name,
            path,
            dest,
            reason,
        )
        return dest

    def found(self) -> list[Quarantined]:
        """Everything in the quarantine directory, oldest first per kind."""
        out: list[Quarantined] = []
        for kind in ("stream", "consumer"):
            d = self.root / f"{kind}s"
            if not d.is_dir():
                continue
            for p in sorted(d.iterdir()):
                name, _, stamp = p.name.rpartition(".")
                if name and stamp.isdigit():
                    out.append(Quarantined(kind, name, p))
        return out
