"""The ``trijet`` command (operator conveniences around the server)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print("usage: trijet serve [server flags]", file=sys.stderr)
    return 2 if args else 0
