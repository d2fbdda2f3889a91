"""Server process entry (filled in by the core server work)."""

from __future__ import annotations


def run(argv: list[str]) -> int:
    raise SystemExit("trijet-server: not built yet")
