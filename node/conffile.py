"""Parser for the NATS configuration file format (nats-server's ``conf`` package).

Theory of operation
-------------------
The format is a relaxed JSON/HOCON: ``key: value``, ``key = value`` or ``key value``; maps
``{ … }`` and arrays ``[ … ]`` whose members are separated by commas, semicolons or new lines;
``#`` and ``//`` comments; single-quoted (raw) and double-quoted (escaped) strings; bare strings;
integers with size suffixes; floats; booleans; ISO-8601 Zulu datetimes; ``$VAR`` references;
``include <file>``; and ``( … )`` raw blocks ending with a ``)`` alone on a line.

This module follows the lexing rules of nats-server's ``conf/lex.go`` and ``conf/parse.go``
(read at nats-server main, 2026), in particular:

* A bare value that starts with a digit is an integer, a float, an IP-ish string
  (``127.0.0.1:4222``) or, as soon as a non-number character appears, a plain string
  (``500ms``, ``1d``). ``2m`` *unquoted* is therefore the integer 2,000,000 — durations must be
  quoted strings, exactly as in nats-server.
* Size suffixes (case-insensitive): ``k m g t p e`` are powers of **1000**; ``kb ki kib``,
  ``mb mi mib`` … are powers of **1024**.
* ``true/false/yes/no/on/off`` (any case) are booleans when bare; quoted they are strings.
* ``$name`` looks the name up in the enclosing maps, innermost first, among keys defined
  *before* the reference, then in the environment (the environment value is parsed as a value,
  so ``PORT=4222`` gives an integer). A reference that resolves nowhere is an error. A value
  that is referenced is marked ``used_as_variable`` so that configuration readers, like
  nats-server, do not report it as an unknown field. ``$2a$…`` (bcrypt hashes) stay strings.
* ``include path`` reads ``path`` relative to the including file's directory and merges its
  keys into the map being parsed.

Deliberate differences from nats-server (it is lenient or buggy there): ``]`` ends a number
(nats turns ``[1, 2]``'s last element into a string and fails), an unknown size suffix such as
``1kbb`` is an error (nats silently drops the key), and columns are 1-based everywhere.

Every value is a :class:`ConfValue` carrying its file, line and column; for a map entry the
position is the position of its key (as nats-server reports it). Errors are
:class:`ConfFileError` whose message is ``"<file>:<line>:<col>: <what>"``.

The module is pure apart from reading include files (and the top file in :func:`parse_file`)
through ``pathlib`` or a reader function given by the caller.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "BOOL_WORDS",
    "SIZE_SUFFIXES",
    "ConfFileError",
    "ConfMap",
    "ConfValue",
    "parse",
    "parse_file",
    "to_plain",
]

#: Size suffix (lower case) → multiplier, as in nats-server ``conf/parse.go``.
SIZE_SUFFIXES: dict[str, int] = {"": 1}
for _i, _letter in enumerate("kmgtpe", start=1):
    SIZE_SUFFIXES[_letter] = 1000**_i
    for _tail in ("b", "i", "ib"):
        SIZE_SUFFIXES[_letter + _tail] = 1024**_i

#: Bare words that lex as booleans (case-insensitive).
BOOL_WORDS: dict[str, bool] = {
    "true": True,
    "yes": True,
    "on": True,
    "false": False,
    "no": False,
    "off": False,
}

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_NUMBER_SUFFIX_LETTERS = frozenset("kKmMgGtTpPeE")
_DATETIME_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
_ENV_KEY = "pk"
_BCRYPT_PREFIX = "2a$"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", '"': '"', "\\": "\\"}
_EOF = ""


class ConfFileError(Exception):
    """A syntax or reference error in a configuration file.

    ``str(err)`` is ``"<file>:<line>:<col>: <reason>"``; the parts are attributes too.
    """

    def __init__(self, file: str, line: int, col: int, reason: str) -> None:
        super().__init__(f"{file}:{line}:{col}: {reason}")
        self.file = file
        self.line = line
        self.col = col
        self.reason = reason


@dataclass(eq=False)
class ConfValue:
    """One parsed value and where it came from.

    ``value`` is ``str``, ``int``, ``float``, ``bool``, ``datetime`` (UTC),
    ``list[ConfValue]`` or ``dict[str, ConfValue]``. For map entries ``line``/``col`` point at
    the key. ``used_as_variable`` is set when a later ``$ref`` resolved to this value.
    """

    value: Any
    file: str
    line: int
    col: int
    used_as_variable: bool = field(default=False)

    @property
    def where(self) -> str:
        """``"<file>:<line>:<col>"`` for error messages."""
        return f"{self.file}:{self.line}:{self.col}"

    def plain(self) -> Any:
        """The value with every nested :class:`ConfValue` unwrapped."""
        v = self.value
        if isinstance(v, dict):
            return {k: c.plain() for k, c in v.items()}
        if isinstance(v, list):
            return [c.plain() for c in v]
        return v


ConfMap = dict[str, ConfValue]


def to_plain(m: Mapping[str, ConfValue]) -> dict[str, Any]:
    """Unwrap a parsed map into plain Python values (for tests and debugging)."""
    return {k: v.plain() for k, v in m.items()}


def _default_reader(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def parse(
    text: str,
    filename: str = "<string>",
    *,
    env: Mapping[str, str] | None = None,
    read_include: Callable[[str], str] | None = None,
) -> ConfMap:
    """Parse configuration text.

    Args:
        text: the file contents.
        filename: used in positions and as the base for relative includes.
        env: environment for ``$VAR`` fallback; ``os.environ`` when None.
        read_include: reads an include file's text given its path; ``pathlib`` when None.
            It may raise ``OSError``; that becomes a ``ConfFileError`` at the include.

    Returns:
        The top-level map, keys in file order (a repeated key keeps its last value).

    Raises:
        ConfFileError: on any syntax error or unresolved variable.
    """
    parser = _Parser(
        text,
        filename,
        os.environ if env is None else env,
        read_include or _default_reader,
        set(),
    )
    return parser.parse_document()


def parse_file(
    path: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    read_include: Callable[[str], str] | None = None,
) -> ConfMap:
    """Read and parse a configuration file (see :func:`parse`).

    Raises:
        ConfFileError: the file cannot be read (position 0:0) or does not parse.
    """
    name = os.fspath(path)
    reader = read_include or _default_reader
    try:
        text = reader(name)
    except OSError as exc:
        raise ConfFileError(name, 0, 0, f"error opening config file: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfFileError(name, 0, 0, f"config file is not UTF-8: {exc}") from None
    return parse(text, name, env=env, read_include=reader)


def _show(c: str) -> str:
    if c == _EOF:
        return "EOF"
    if c == "\n":
        return "\\n"
    if c == "\r":
        return "\\r"
    return c


def _is_nl(c: str) -> bool:
    return c in ("\n", "\r")


def _is_blank(c: str) -> bool:
    """Space or tab: whitespace that does not end a line."""
    return c in (" ", "\t")


def _is_space(c: str) -> bool:
    return c != _EOF and c.isspace()


def _ends_number(c: str) -> bool:
    return c == _EOF or c in "\n\r};,] \t"


def _ends_bare_string(c: str) -> bool:
    return c == _EOF or c in "\n\r;,]} \t"


class _Parser:
    def __init__(
        self,
        text: str,
        filename: str,
        env: Mapping[str, str],
        reader: Callable[[str], str],
        env_refs: set[str],
    ) -> None:
        self.text = text
        self.file = filename
        self.env = env
        self.reader = reader
        self.env_refs = env_refs  # shared across env sub-parsers: cycle detection
        self.pos = 0
        self.line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
        self.maps: list[ConfMap] = []  # enclosing maps, for variable lookup

    # -- cursor ------------------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> str:
        i = self.pos + ahead
        return self.text[i] if i < len(self.text) else _EOF

    def advance(self, n: int = 1) -> None:
        self.pos += n

    def where(self, pos: int | None = None) -> tuple[int, int]:
        p = self.pos if pos is None else pos
        line = bisect.bisect_right(self.line_starts, p)
        return line, p - self.line_starts[line - 1] + 1

    def error(self, reason: str, pos: int | None = None) -> ConfFileError:
        line, col = self.where(pos)
        return ConfFileError(self.file, line, col, reason)

    def value_at(self, value: Any, pos: int) -> ConfValue:
        line, col = self.where(pos)
        return ConfValue(value, self.file, line, col)

    def at_comment(self) -> bool:
        c = self.peek()
        return c == "#" or (c == "/" and self.peek(1) == "/")

    def skip_comment(self) -> None:
        while not _is_nl(self.peek()) and self.peek() != _EOF:
            self.advance()

    def skip_space_and_comments(self) -> None:
        while True:
            c = self.peek()
            if _is_space(c):
                self.advance()
            elif self.at_comment():
                self.skip_comment()
            else:
                return

    # -- structure ---------------------------------------------------------------------------

    def parse_document(self) -> ConfMap:
        top: ConfMap = {}
        self.maps.append(top)
        braces = 0  # a whole file may be wrapped in { } (JSON-like)
        while True:
            self.skip_space_and_comments()
            c = self.peek()
            if c == _EOF:
                if braces:
                    raise self.error("Unexpected EOF: missing '}'")
                return top
            if c == "{":
                braces += 1
                self.advance()
                continue
            if c == "}":
                if not braces:
                    raise self.error("Unexpected '}' at top level")
                braces -= 1
                self.advance()
                continue
            self.parse_entry(top, top_level=True)

    def parse_entry(self, target: ConfMap, *, top_level: bool) -> None:
        """Parse one ``key [sep] value`` (or ``include``) and the terminator after it."""
        key_pos = self.pos
        key, bare = self.parse_key(top_level=top_level)
        if bare and key.lower() == "include" and _is_blank(self.peek()):
            self.parse_include(target, key_pos)
        else:
            while _is_space(self.peek()):  # nats allows even new lines before the value
                self.advance()
            if self.peek() in (":", "="):
                self.advance()
            elif self.peek() == _EOF:
                raise self.error(f"config is invalid: key {key!r} has no value", key_pos)
            value = self.parse_value()
            kline, kcol = self.where(key_pos)
            value.line, value.col = kline, kcol
            target.pop(key, None)  # re-definition moves the key to its new place
            target[key] = value
        self.parse_value_end(top_level=top_level)

    def parse_key(self, *, top_level: bool) -> tuple[str, bool]:
        c = self.peek()
        if c in (":", "="):
            raise self.error(f"Unexpected key separator '{c}'")
        if c == "]":
            raise self.error("Unexpected array end ']' processing map")
        if c in ("'", '"'):
            start = self.pos + 1
            end = self.text.find(c, start)
            if end == -1:
                raise self.error("Unexpected EOF processing quoted key")
            self.pos = end + 1
            return self.text[start:end], False
        start = self.pos
        while True:
            c = self.peek()
            if c == _EOF:
                if not top_level:
                    raise self.error("Unexpected EOF processing map key")
                break
            if _is_space(c) or c in (":", "="):
                break
            self.advance()
        return self.text[start : self.pos], True

    def parse_value_end(self, *, top_level: bool) -> None:
        while True:
            c = self.peek()
            if _is_blank(c):
                self.advance()
            elif self.at_comment():
                self.skip_comment()
            elif _is_nl(c) or c in (";", ","):
                self.advance()
                return
            elif c == "}":
                return  # the enclosing map (or top-level brace) consumes it
            elif c == _EOF:
                if top_level:
                    return
                raise self.error("Unexpected EOF processing map")
            elif top_level:
                raise self.error(
                    "Expected a top-level value to end with a new line, comment or EOF, "
                    f"but got '{_show(c)}' instead"
                )
            else:
                raise self.error(
                    "Expected a map value terminator ',' or a map terminator '}', "
                    f"but got '{_show(c)}' instead"
                )

    def parse_include(self, target: ConfMap, key_pos: int) -> None:
        while _is_blank(self.peek()):
            self.advance()
        c = self.peek()
        start = self.pos
        if c in ("'", '"'):
            end = self.text.find(c, start + 1)
            if end == -1:
                raise self.error("Unexpected EOF in quoted include")
            name = self.text[start + 1 : end]
            self.pos = end + 1
        else:
            bad = {
                "[": "start of an array",
                "{": "start of a map",
                "(": "start of a block",
                "\\": "escape sequence",
                "\n": "new line",
                "\r": "new line",
                _EOF: "end of file",
            }
            if c in bad:
                raise self.error(f"Expected include value but found {bad[c]}")
            if c.isdigit() or c == "-":
                raise self.error("Expected include value but found start of a number")
            while not (_is_space(self.peek()) or self.peek() in (_EOF, ";", "}", "'")):
                self.advance()
            name = self.text[start : self.pos]
            if self.peek() == "'":
                self.advance()
        base = os.path.dirname(self.file) if self.file not in ("", "<string>") else ""
        path = os.path.join(base, name)
        try:
            text = self.reader(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise self.error(f"error opening include file {name!r}: {exc}", key_pos) from None
        sub = _Parser(text, path, self.env, self.reader, self.env_refs)
        for k, v in sub.parse_document().items():
            target.pop(k, None)
            target[k] = v

    # -- values ------------------------------------------------------------------------------

    def parse_value(self) -> ConfValue:
        while _is_blank(self.peek()):
            self.advance()
        c = self.peek()
        start = self.pos
        if c == _EOF:
            raise self.error("Unexpected EOF: expected a value")
        if _is_nl(c):
            raise self.error("Expected value but found new line")
        if c == "[":
            return self.parse_array()
        if c == "{":
            return self.parse_map()
        if c == "'":
            end = self.text.find("'", start + 1)
            if end == -1:
                raise self.error("Unexpected EOF in single-quoted string")
            self.pos = end + 1
            return self.value_at(self.text[start + 1 : end], start)
        if c == '"':
            self.advance()
            return self.value_at(self.parse_escaped(quoted=True), start)
        if c == "(":
            return self.parse_block()
        if c == "-" or c.isdigit():
            return self.parse_number()
        if c == ".":
            raise self.error("Floats must start with a digit")
        return self.parse_bare(start)

    def parse_array(self) -> ConfValue:
        start = self.pos
        self.advance()  # [
        items: list[ConfValue] = []
        while True:
            self.skip_space_and_comments()
            c = self.peek()
            if c == "]":
                self.advance()
                return self.value_at(items, start)
            if c == ",":
                raise self.error("Unexpected array value terminator ','")
            if c == _EOF:
                raise self.error("Unexpected EOF processing array")
            items.append(self.parse_value())
            while True:  # value end
                c = self.peek()
                if _is_blank(c):
                    self.advance()
                elif self.at_comment():
                    self.skip_comment()
                elif c == "," or _is_nl(c):
                    self.advance()
                    break
                elif c == "]":
                    break
                elif c == _EOF:
                    raise self.error("Unexpected EOF processing array")
                else:
                    raise self.error(
                        "Expected an array value terminator ',' or an array terminator ']', "
                        f"but got '{_show(c)}' instead"
                    )

    def parse_map(self) -> ConfValue:
        start = self.pos
        self.advance()  # {
        m: ConfMap = {}
        self.maps.append(m)
        try:
            while True:
                self.skip_space_and_comments()
                c = self.peek()
                if c == "}":
                    self.advance()
                    return self.value_at(m, start)
                if c == _EOF:
                    raise self.error("Unexpected EOF processing map")
                if c == ",":
                    raise self.error("Unexpected map value terminator ','")
                self.parse_entry(m, top_level=False)
        finally:
            self.maps.pop()

    def parse_block(self) -> ConfValue:
        start = self.pos
        m = re.compile(r"\n\)(?=\n|\Z)").search(self.text, start + 1)
        if m is None:
            raise self.error("Unexpected EOF processing block")
        self.pos = m.end()
        return self.value_at(self.text[start + 1 : m.start()], start)

    def parse_escaped(self, *, quoted: bool) -> str:
        """Read a double-quoted (after the quote) or bare string with backslash escapes."""
        out = bytearray()
        while True:
            c = self.peek()
            if quoted:
                if c == _EOF:
                    raise self.error("Unexpected EOF in double-quoted string")
                if c == '"':
                    self.advance()
                    break
            elif _ends_bare_string(c):
                break
            elif c == "'":
                self.advance()
                break
            if c == "\\":
                self.advance()
                e = self.peek()
                if e == "x":
                    digits = self.text[self.pos + 1 : self.pos + 3]
                    if len(digits) < 2 or any(_is_nl(d) for d in digits):
                        raise self.error(
                            "Expected two hexadecimal digits after '\\x', but hit end of line"
                        )
                    try:
                        out += bytes.fromhex(digits)
                    except ValueError:
                        raise self.error(
                            f"Expected two hexadecimal digits after '\\x', but got '{digits}'"
                        ) from None
                    self.advance(3)
                    continue
                if e not in _ESCAPES:
                    raise self.error(
                        f"Invalid escape character '{_show(e)}'. Only the following escape "
                        'characters are allowed: \\xXX, \\t, \\n, \\r, \\", \\\\.'
                    )
                out += _ESCAPES[e].encode()
                self.advance()
                continue
            out += c.encode("utf-8", "surrogatepass")
            self.advance()
        return out.decode("utf-8", "replace")

    def parse_bare(self, start: int) -> ConfValue:
        """A bare string, boolean or ``$variable``, starting at ``start`` (may be behind pos)."""
        self.pos = start
        scan = start
        while not _ends_bare_string(self.text[scan] if scan < len(self.text) else _EOF):
            if self.text[scan] in ("\\", "'"):
                break
            scan += 1
        if scan < len(self.text) and self.text[scan] in ("\\", "'"):
            # Escapes (or a quote ending it) present: always a plain string.
            return self.value_at(self.parse_escaped(quoted=False), start)
        text = self.text[start:scan]
        self.pos = scan
        low = text.lower()
        if low in BOOL_WORDS:
            return self.value_at(BOOL_WORDS[low], start)
        if text.startswith("$") and len(text) > 1:
            return self.resolve_variable(text[1:], start)
        return self.value_at(text, start)

    def parse_number(self) -> ConfValue:
        start = self.pos
        if self.peek() == "-":
            self.advance()
            if not self.peek().isdigit():
                if self.peek() == ".":
                    raise self.error("Floats must start with a digit, not '.'")
                raise self.error(f"Expected a digit but got '{_show(self.peek())}'")
        while self.peek().isdigit():
            self.advance()
        c = self.peek()
        negative = self.text[start] == "-"
        if c == "-" and not negative:
            if self.pos - start != 4:
                raise self.error("All ISO8601 dates must be in full Zulu form")
            m = _DATETIME_RE.match(self.text, start)
            if m is None:
                raise self.error("Expected a full Zulu ISO8601 datetime (YYYY-MM-DDTHH:MM:SSZ)")
            self.pos = m.end()
            try:
                dt = datetime.strptime(m.group(), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            except ValueError:
                raise self.error(f"invalid datetime '{m.group()}'", start) from None
            return self.value_at(dt, start)
        if c == ".":
            self.advance()
            if not self.peek().isdigit():
                raise self.error(
                    f"Floats must have a digit after the '.', but got '{_show(self.peek())}' "
                    "instead"
                )
            while self.peek().isdigit():
                self.advance()
            if self.peek() == ".":  # an IP address (maybe with :port), not a float
                while self.peek().isdigit() or self.peek() in ".:-":
                    self.advance()
                return self.value_at(self.text[start : self.pos], start)
            return self.value_at(float(self.text[start : self.pos]), start)
        if c in _NUMBER_SUFFIX_LETTERS:
            digits_end = self.pos
            self.advance()
            while self.peek() in ("b", "B", "i", "I"):
                self.advance()
            if _ends_number(self.peek()) or self.peek().isdigit():
                return self.sized_integer(start, digits_end)
            return self.parse_bare(start)
        if _ends_number(c) or negative:
            return self.sized_integer(start, self.pos)
        return self.parse_bare(start)  # e.g. 500ms, 1d, 3rd: a string after all

    def sized_integer(self, start: int, digits_end: int) -> ConfValue:
        raw = self.text[start : self.pos]
        suffix = self.text[digits_end : self.pos].lower()
        if suffix not in SIZE_SUFFIXES:
            raise self.error(f"invalid size suffix in '{raw}'", start)
        n = int(self.text[start:digits_end]) * SIZE_SUFFIXES[suffix]
        if not _INT64_MIN <= n <= _INT64_MAX:
            raise self.error(f"integer '{raw}' is out of the range", start)
        return self.value_at(n, start)

    # -- variables ---------------------------------------------------------------------------

    def resolve_variable(self, name: str, pos: int) -> ConfValue:
        if name.startswith(_BCRYPT_PREFIX):
            return self.value_at("$" + name, pos)
        for m in reversed(self.maps):
            found = m.get(name)
            if found is not None:
                found.used_as_variable = True
                return self.value_at(found.value, pos)
        if name in self.env_refs:
            raise self.error(f"variable reference cycle for '{name}'", pos)
        if name in self.env:
            self.env_refs.add(name)
            try:
                sub = _Parser(
                    f"{_ENV_KEY}={self.env[name]}",
                    f"${name}",
                    self.env,
                    self.reader,
                    self.env_refs,
                )
                try:
                    parsed = sub.parse_document()
                except ConfFileError as exc:
                    raise self.error(
                        f"variable reference for '{name}' could not be parsed: {exc.reason}", pos
                    ) from None
            finally:
                self.env_refs.discard(name)
            if _ENV_KEY in parsed:
                return self.value_at(parsed[_ENV_KEY].value, pos)
        line, _ = self.where(pos)
        raise self.error(f"variable reference for '{name}' on line {line} can not be found", pos)
