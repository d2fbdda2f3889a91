"""Subject filter matching for the store.

Theory of operation
-------------------
A filter is a dot-separated subject whose tokens may be ``*`` (exactly one
token) or, as the last token, ``>`` (one or more tokens).  ``""`` and ``">"``
match everything.  Filters are compiled once into a tuple of tokens (cached);
matching a subject is then a token walk with no allocation beyond ``split``.
Several filters match if any matches.  This is a small private copy of the
rule so the store stays a leaf (the node's sublist is the fast path for
routing; the store only filters its own subjects).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

__all__ = ["Matcher", "compile_filters", "is_literal", "is_match_all", "subject_matches"]

Matcher = Callable[[str], bool]


def is_literal(filter: str) -> bool:
    """True if ``filter`` contains no wildcard token."""
    if "*" not in filter and ">" not in filter:
        return True
    return all(t not in ("*", ">") for t in filter.split("."))


def is_match_all(filter: str) -> bool:
    """True for ``""`` and ``">"``."""
    return filter in ("", ">")


@lru_cache(maxsize=1024)
def _tokens(filter: str) -> tuple[str, ...]:
    return tuple(filter.split("."))


def subject_matches(filter: str, subject: str) -> bool:
    """Does literal ``subject`` match ``filter`` (NATS wildcard rules)?"""
    if filter in ("", ">"):
        return True
    if is_literal(filter):
        return filter == subject
    ft = _tokens(filter)
    st = subject.split(".")
    nf = len(ft)
    for i, tok in enumerate(ft):
        if tok == ">" and i == nf - 1:
            return len(st) > i
        if i >= len(st):
            return False
        if tok != "*" and tok != st[i]:
            return False
    return len(st) == nf


def _normalise(filters: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(filters, str):
        return (filters,)
    return tuple(filters)


def compile_filters(filters: str | Sequence[str]) -> Matcher | None:
    """Compile filters into a predicate; ``None`` means "matches everything".

    Args:
        filters: One filter or several; an empty sequence matches everything.
    """
    fs = _normalise(filters)
    if not fs or any(is_match_all(f) for f in fs):
        return None
    literals = frozenset(f for f in fs if is_literal(f))
    wild = tuple(f for f in fs if not is_literal(f))
    if not wild:
        return literals.__contains__

    def match(subject: str) -> bool:
        if subject in literals:
            return True
        return any(subject_matches(f, subject) for f in wild)

    return match


def literal_filters(filters: str | Sequence[str]) -> tuple[str, ...] | None:
    """The filters if they are all literal, else ``None``."""
    fs = _normalise(filters)
    if fs and all(is_literal(f) and not is_match_all(f) for f in fs):
        return fs
    return None


def matching(subjects: Iterable[str], filters: str | Sequence[str]) -> list[str]:
    """Subjects from ``subjects`` matching any of ``filters``."""
    m = compile_filters(filters)
    if m is None:
        return list(subjects)
    return [s for s in subjects if m(s)]
