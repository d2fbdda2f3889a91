"""Subject transforms: a source filter and a destination template, as nats-server has them.

Theory of operation
-------------------
A transform ``(src, dest)`` maps a literal subject that matches ``src`` to a
new subject built from ``dest``.  It is what a stream's
``subject_transform`` does to a captured subject before it is stored, what
``republish`` does to a stored subject, and what mirrors and sources do to
the subjects they copy.  ``compile`` checks the pair once (nats-server
``NewSubjectTransform``); ``match`` then maps subjects.

Rules (observed on nats-server 2.15.1 and read in its source):

* an empty ``dest`` means "no transform" (``compile`` returns ``None``); an
  empty ``src`` means ``>``;
* both must be valid subjects, ``dest`` may not contain ``*``, and ``src``
  ends in ``>`` exactly when ``dest`` does (the tail is carried over);
* a ``dest`` token is a literal, ``$n`` (the n-th ``*`` of ``src``), or a
  mapping function ``{{name(args)}}`` (first letter of the name in either
  case): ``wildcard(n)``, ``partition(count[, n...])`` (FNV-1a 32 of the
  named tokens concatenated, or of the whole subject, modulo ``count``),
  ``splitFromLeft(n, pos)``, ``splitFromRight(n, pos)``,
  ``sliceFromLeft(n, size)``, ``sliceFromRight(n, size)``,
  ``split(n, delimiter)``, ``left(n, len)``, ``right(n, len)``,
  ``random(count)``;
* a ``src`` without wildcards allows only literals, ``partition`` (of the
  whole subject) and ``random`` in ``dest``;
* a subject that does not match ``src`` is not transformed (``match``
  returns ``None``; a stream then stores it unchanged).

Errors carry nats-server's wording (``invalid mapping destination: wildcard
index out of range in {{wildcard(3)}}: [3]``).  Pure: no I/O; ``random``
draws from a ``random.Random`` the caller passes (DESIGN rule 7).
"""

from __future__ import annotations

import functools
import random as _random
import re
from dataclasses import dataclass

__all__ = ["SubjectTransform", "TransformError", "cached", "fnv1a32", "transform_error"]

_INT32_MAX = (1 << 31) - 1


class TransformError(ValueError):
    """A transform that nats-server would refuse; ``str()`` is its wording."""


_BAD_SUBJECT = "invalid subject"
_DEST = "invalid mapping destination"
_OUT_OF_RANGE = _DEST + ": wildcard index out of range"
_NOT_ENOUGH = _DEST + ": not enough arguments passed to the function"
_TOO_MANY = _DEST + ": too many arguments passed to the function"
_INVALID_ARG = _DEST + ": function argument is invalid or in the wrong format"
_UNKNOWN = _DEST + ": unknown function"


def _err(reason: str, token: str) -> TransformError:
    return TransformError(f"{reason} in {token}")


# Function kinds, in the order nats-server tries them.
LITERAL, WILDCARD, PARTITION = "literal", "wildcard", "partition"
SPLIT_FROM_LEFT, SPLIT_FROM_RIGHT = "splitfromleft", "splitfromright"
SLICE_FROM_LEFT, SLICE_FROM_RIGHT = "slicefromleft", "slicefromright"
RIGHT, LEFT, SPLIT, RANDOM = "right", "left", "split", "random"

_FN_NAMES = (
    ("wildcard", WILDCARD),
    ("partition", PARTITION),
    ("splitFromLeft", SPLIT_FROM_LEFT),
    ("splitFromRight", SPLIT_FROM_RIGHT),
    ("sliceFromLeft", SLICE_FROM_LEFT),
    ("sliceFromRight", SLICE_FROM_RIGHT),
    ("right", RIGHT),
    ("left", LEFT),
    ("split", SPLIT),
    ("random", RANDOM),
)


def _fn_regex(name: str) -> re.Pattern[str]:
    # nats-server accepts either case for the first letter of each word
    parts = re.findall(r"[A-Z]?[a-z]+", name)
    pat = "".join(f"[{p[0].lower()}{p[0].upper()}]{p[1:]}" for p in parts)
    return re.compile(r"\{\{\s*" + pat + r"\s*\((.*)\)\s*\}\}")


_FN_REGEXES = tuple((_fn_regex(name), kind) for name, kind in _FN_NAMES)
_ARG_SEP = re.compile(r",\s*")


def _go_atoi(s: str) -> int | None:
    """Go ``strconv.Atoi``: optional sign, ASCII digits, nothing else."""
    body = s[1:] if s[:1] in ("+", "-") else s
    if not body or not body.isascii() or not body.isdigit() or len(body.lstrip("0")) > 19:
        return None  # (Go: out of range; int() would refuse 4,300+ digits anyway)
    return int(s)


@dataclass(frozen=True, slots=True)
class _Tok:
    """One destination token: a kind, source token positions and arguments."""

    kind: str
    text: str = ""
    idx: tuple[int, ...] = ()
    num: int = -1
    sep: str = ""


def _parse_token(token: str) -> tuple[str, tuple[int, ...], int, str]:
    """nats-server ``indexPlaceHolders``: ``(kind, wildcard numbers, int, str)``."""
    n = len(token)
    if n > 1 and token[0] == "$":
        v = _go_atoi(token[1:])
        return (LITERAL, (), -1, "") if v is None else (WILDCARD, (v,), -1, "")
    if not (n > 4 and token.startswith("{{") and token.endswith("}}")):
        return LITERAL, (), -1, ""
    for rx, kind in _FN_REGEXES:
        m = rx.search(token)
        if m is None:
            continue
        args = _ARG_SEP.split(m.group(1))
        return _parse_fn(token, kind, args)
    raise _err(_UNKNOWN, token)


def _int_arg(token: str, a: str) -> int:
    v = _go_atoi(a.strip(" "))
    if v is None:
        raise _err(_INVALID_ARG, token)
    return v


def _parse_fn(token: str, kind: str, args: list[str]) -> tuple[str, tuple[int, ...], int, str]:
    if kind == WILDCARD:
        if len(args) == 1 and args[0] == "":
            raise _err(_NOT_ENOUGH, token)
        if len(args) != 1:
            raise _err(_TOO_MANY, token)
        return WILDCARD, (_int_arg(token, args[0]),), -1, ""
    if kind in (PARTITION, RANDOM):
        if kind == RANDOM and len(args) != 1:
            raise _err(_NOT_ENOUGH, token)
        count = _int_arg(token, args[0])
        if count > _INT32_MAX:
            raise _err(_INVALID_ARG, token)
        return kind, tuple(_int_arg(token, a) for a in args[1:]), count, ""
    if len(args) < 2:
        raise _err(_NOT_ENOUGH, token)
    if len(args) > 2:
        raise _err(_TOO_MANY, token)
    idx = _int_arg(token, args[0])
    if kind == SPLIT:
        if " " in args[1] or "." in args[1]:
            raise _err(_INVALID_ARG, token)
        return SPLIT, (idx,), -1, args[1]
    num = _int_arg(token, args[1])
    if not -(1 << 31) <= num <= _INT32_MAX:
        raise _err(_INVALID_ARG, token)
    return kind, (idx,), num, ""


def _subject_info(subject: str) -> tuple[bool, list[str], int, bool]:
    """``(valid, tokens, number of '*', ends with '>')`` like nats-server."""
    if not subject:
        return False, [], 0, False
    tokens = subject.split(".")
    pwc, fwc = 0, False
    for t in tokens:
        if not t or fwc:
            return False, [], 0, False
        if t == ">":
            fwc = True
        elif t == "*":
            pwc += 1
    return True, tokens, pwc, fwc


def fnv1a32(data: bytes) -> int:
    """32-bit FNV-1a (Go's ``hash/fnv`` ``New32a``)."""
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def _matches(tokens: list[str], pattern: list[str]) -> bool:
    for i, p in enumerate(pattern):
        if p == ">":
            return len(tokens) > i
        if i >= len(tokens) or (p != "*" and p != tokens[i]):
            return False
    return len(tokens) == len(pattern)


@dataclass(frozen=True, slots=True)
class SubjectTransform:
    """A compiled transform; build it with ``compile``."""

    src: str
    dest: str
    _src_tokens: tuple[str, ...]
    _toks: tuple[_Tok, ...]
    _identity: bool

    @classmethod
    def compile(cls, src: str, dest: str) -> SubjectTransform | None:
        """Check and compile ``src -> dest``.

        Returns:
            The transform, or ``None`` when ``dest`` is empty (no transform).

        Raises:
            TransformError: with nats-server's reason.
        """
        if not dest:
            return None
        src = src or ">"
        sv, stoks, npwcs, sfwc = _subject_info(src)
        dv, dtoks, dnpwcs, dfwc = _subject_info(dest)
        if not sv or not dv or dnpwcs > 0 or sfwc != dfwc:
            raise TransformError(_BAD_SUBJECT)
        # wildcard number (1-based) -> position of that '*' in src
        positions: dict[int, int] = {}
        for i, t in enumerate(stoks):
            if t == "*":
                positions[len(positions) + 1] = i
        toks = []
        for token in dtoks:
            kind, nums, num, sep = _parse_token(token)
            if kind == LITERAL:
                toks.append(_Tok(LITERAL, token))
                continue
            if npwcs == 0 and not sfwc:
                if kind not in (PARTITION, RANDOM):
                    raise _err(_OUT_OF_RANGE, token)
                toks.append(_Tok(kind, token, (), num))
                continue
            if kind == RANDOM:
                toks.append(_Tok(RANDOM, token, (), num))
                continue
            for n in nums:
                if n > npwcs:
                    raise TransformError(f"{_OUT_OF_RANGE} in {token}: [{n}]")
            idx = tuple(positions.get(n, 0) for n in nums)
            toks.append(_Tok(kind, token, idx, num, sep))
        identity = src == ">" and dest == ">"
        return cls(src, dest, tuple(stoks), tuple(toks), identity)

    def match(self, subject: str, rng: _random.Random | None = None) -> str | None:
        """The transformed subject, or ``None`` if ``subject`` does not match
        ``src`` (or is not a valid literal subject).

        Args:
            subject: A literal subject.
            rng: Randomness for ``random(n)`` (a fresh ``random.Random`` if None).
        """
        if self._identity:
            return subject
        tokens = subject.split(".")
        if any(not t or t in ("*", ">") for t in tokens):
            return None
        if self.src != ">" and not _matches(tokens, list(self._src_tokens)):
            return None
        return self._render(tokens, rng)

    def _render(self, tokens: list[str], rng: _random.Random | None) -> str:
        out: list[str] = []
        last = len(self._toks) - 1
        for i, t in enumerate(self._toks):
            if t.kind == LITERAL:
                if t.text == ">":
                    break
                out.append(t.text)
            else:
                out.append(self._apply_fn(t, tokens, rng))
            if i < last:
                out.append(".")
        if self._toks[-1].text == ">":
            out.append(".".join(tokens[len(self._src_tokens) - 1 :]))
        return "".join(out)

    @staticmethod
    def _apply_fn(t: _Tok, tokens: list[str], rng: _random.Random | None) -> str:
        if t.kind == PARTITION:
            if t.idx:
                key = "".join(tokens[i] for i in t.idx)
            else:
                key = ".".join(tokens)
            buckets = t.num & 0xFFFFFFFF
            return "0" if buckets == 0 else str(fnv1a32(key.encode()) % buckets)
        if t.kind == RANDOM:
            if t.num == 0:
                return "0"
            r = rng or _random.Random()
            return str(r.randrange(1 << 31) % t.num)
        if t.kind == WILDCARD:
            i = t.idx[0] if t.idx else -1
            return tokens[i] if 0 <= i < len(tokens) else ""
        tok = tokens[t.idx[0]]
        n, size = len(tok), t.num
        if t.kind == SPLIT:
            parts = tok.split(t.sep)
            out = []
            for j, part in enumerate(parts):
                out.append(part)
                if j < len(parts) - 1 and parts[j + 1] and not (j == 0 and not part):
                    out.append(".")
            return "".join(out)
        if not 0 < size < n:
            return tok
        if t.kind == SPLIT_FROM_LEFT:
            return tok[:size] + "." + tok[size:]
        if t.kind == SPLIT_FROM_RIGHT:
            return tok[: n - size] + "." + tok[n - size :]
        if t.kind == LEFT:
            return tok[:size]
        if t.kind == RIGHT:
            return tok[n - size :]
        if t.kind == SLICE_FROM_LEFT:
            return ".".join(tok[i : i + size] for i in range(0, n, size))
        # SLICE_FROM_RIGHT
        rem = n % size
        parts = [tok[:rem]] if rem else []
        parts += [tok[i : i + size] for i in range(rem, n, size)]
        return ".".join(parts)


@functools.lru_cache(maxsize=1024)
def cached(src: str, dest: str) -> SubjectTransform | None:
    """``SubjectTransform.compile`` memoised; ``None`` also when the pair is
    invalid (configs are validated before they get here, by the API layer)."""
    try:
        return SubjectTransform.compile(src, dest)
    except TransformError:
        return None


def transform_error(src: str, dest: str) -> str:
    """Why nats-server would refuse ``src -> dest`` ("" if it would not):
    the reason a stream's ``subject_transform`` is rejected with (10156)."""
    try:
        SubjectTransform.compile(src, dest)
    except TransformError as e:
        return str(e)
    return ""
