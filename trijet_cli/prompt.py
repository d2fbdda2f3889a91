"""Questions asked when a required flag is missing (natscli's interactive mode).

Each helper prints the question (with its default in brackets, as natscli's
survey prompts show it) to stderr and reads one line from stdin; an empty answer
takes the default.  ``--defaults`` makes the commands fill in natscli's defaults
instead of asking.  At end of input a question without a default is an error.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from trijet_cli.conn import fatal


def ask(message: str, default: str = "", *, required: bool = False, help_: str = "") -> str:
    del help_  # natscli shows it on '?'; here the flag names are in --help
    suffix = f" ({default})" if default else ""
    print(f"? {message}{suffix} ", end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        if default or not required:
            print(file=sys.stderr)
            return default
        fatal(f"invalid input: {message}: no answer (use flags or --defaults)")
    answer = line.strip() or default
    if required and not answer:
        fatal(f"invalid input: {message}: value is required")
    return answer


def select(message: str, options: Sequence[str], default: str = "") -> str:
    shown = ", ".join(options)
    while True:
        answer = ask(f"{message} [{shown}]", default, required=True)
        for o in options:
            if answer.lower() == o.lower():
                return o
        print(f"X {answer!r} is not one of: {shown}", file=sys.stderr)


def confirm(message: str, default: bool) -> bool:
    answer = ask(f"{message} (y/N)" if not default else f"{message} (Y/n)", "")
    if not answer:
        return default
    return answer.lower() in ("y", "yes", "true")


def ask_int(message: str, default: str) -> int:
    answer = ask(message, default, required=True)
    try:
        return int(answer)
    except ValueError:
        fatal(f"invalid input: {message}: {answer!r} is not a number")
