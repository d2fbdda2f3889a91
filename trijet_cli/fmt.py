"""natscli's output shapes: value formatting, column reports and rounded tables.

Facts carried over from natscli (its ``columns`` writer and go-pretty tables):

* values: integers with thousands commas (``1,234``), byte sizes in IEC units
  (``170 B``, ``1.5 KiB``, ``20 KiB``), durations as natscli humanizes Go
  durations (``2m0s``, ``30.00s``, ``12ms``), times as local
  ``2006-01-02 15:04:05``, booleans ``true``/``false``, lists joined by ``, ``;
* a column report is a heading line and a blank line, then rows whose labels are
  right-aligned to the longest label plus two spaces, ``label: value``; a section
  title (``Options:``) is preceded and followed by a blank line;
* a table has rounded borders, an optional centred title row and left-aligned
  cells padded by one space.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from typing import Any

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
NS_PER_US = 1_000
INT64_MAX = (1 << 63) - 1


def comma(n: int) -> str:
    """``1234567`` → ``1,234,567`` (go-humanize ``Comma``)."""
    return f"{int(n):,}"


def ibytes(n: int) -> str:
    """IEC byte size as go-humanize ``IBytes``: ``9 B``, ``170 B``, ``1.5 KiB``, ``20 KiB``."""
    n = int(n)
    if n < 10:
        return f"{n} B"
    sizes = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    e = min(math.floor(math.log(n) / math.log(1024)), len(sizes) - 1)
    val = math.floor(n / (1024**e) * 10 + 0.5) / 10
    if val < 10:
        return f"{val:.1f} {sizes[e]}"
    return f"{_round_half_even(val)} {sizes[e]}"


def _round_half_even(v: float) -> int:
    return round(v)  # Python's round is half-to-even, as Go's %.0f


def _go_duration_string(ns: int) -> str:
    """Go's ``time.Duration.String`` (used below one second)."""
    if ns == 0:
        return "0s"
    neg = ns < 0
    ns = abs(ns)
    if ns < NS_PER_US:
        s = f"{ns}ns"
    elif ns < NS_PER_MS:
        s = _trim(f"{ns / NS_PER_US:.3f}") + "µs"
    elif ns < NS_PER_S:
        s = _trim(f"{ns / NS_PER_MS:.6f}") + "ms"
    else:
        s = _trim(f"{ns / NS_PER_S:.9f}") + "s"
    return ("-" if neg else "") + s


def _trim(s: str) -> str:
    return s.rstrip("0").rstrip(".") if "." in s else s


def duration(ns: int) -> str:
    """natscli's ``HumanizeDuration`` of a Go duration in nanoseconds."""
    ns = int(ns)
    if ns >= INT64_MAX:
        return "never"
    if ns < NS_PER_MS:
        return _go_duration_string(round(ns / NS_PER_US) * NS_PER_US)
    if ns < NS_PER_S:
        return _go_duration_string(round(ns / NS_PER_MS) * NS_PER_MS)
    tsecs = ns // NS_PER_S
    tmins, thrs = tsecs // 60, tsecs // 3600
    tdays = thrs // 24
    tyrs = tdays // 365
    if tyrs > 0:
        return f"{tyrs}y{tdays % 365}d{thrs % 24}h{tmins % 60}m{tsecs % 60}s"
    if tdays > 0:
        return f"{tdays}d{thrs % 24}h{tmins % 60}m{tsecs % 60}s"
    if thrs > 0:
        return f"{thrs}h{tmins % 60}m{tsecs % 60}s"
    if tmins > 0:
        return f"{tmins}m{tsecs % 60}s"
    return f"{ns / NS_PER_S:.2f}s"


def parse_time(s: str | None) -> dt.datetime | None:
    """An RFC 3339 time from the API (nanosecond fractions allowed); None when absent/zero."""
    if not s or s.startswith("0001-01-01"):
        return None
    head, _, frac = s.partition(".")
    tz = ""
    if frac:
        digits = frac.rstrip("Z")
        for sep in ("+", "-"):
            if sep in digits:
                digits, _, off = digits.partition(sep)
                tz = sep + off
        micro = (digits + "000000")[:6]
        text = f"{head}.{micro}{tz or '+00:00'}"
    else:
        text = head.replace("Z", "+00:00")
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def local_time(t: dt.datetime | str | None) -> str:
    """``2006-01-02 15:04:05`` in local time (natscli's time format)."""
    if isinstance(t, str):
        t = parse_time(t)
    if t is None:
        return "0001-01-01 00:00:00"
    return t.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def since_ns(t: str | None, ref: str | None = None) -> int:
    """Nanoseconds from ``t`` to ``ref`` (or now); 0 when ``t`` is absent."""
    start = parse_time(t)
    if start is None:
        return 0
    end = parse_time(ref) if ref else None
    end = end or dt.datetime.now(dt.UTC)
    return max(0, int((end - start).total_seconds() * NS_PER_S))


def f(v: Any) -> str:
    """natscli's ``f``: commas for ints, ``, ``-joined lists, lower-case booleans."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return comma(v)
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".")
    if isinstance(v, list | tuple):
        return ", ".join(str(x) for x in v)
    if isinstance(v, dt.datetime):
        return local_time(v)
    return str(v)


class Columns:
    """A natscli column report (heading, section titles, aligned ``label: value`` rows)."""

    def __init__(self, heading: str = "") -> None:
        self.heading = heading
        self._rows: list[
            tuple[str, Any]
        ] = []  # ("row", (label, text)) | ("title", t) | ("line", t)

    def row(self, label: str, value: Any) -> None:
        self._rows.append(("row", (label, f(value))))

    def row_if(self, label: str, value: Any, cond: bool) -> None:
        if cond:
            self.row(label, value)

    def row_if_not_empty(self, label: str, value: str | None) -> None:
        if value:
            self.row(label, value)

    def title(self, text: str) -> None:
        self._rows.append(("title", text))

    def line(self, text: str | None = None) -> None:
        self._rows.append(("line", text))

    def render(self) -> str:
        out: list[str] = []
        longest = max((len(v[0]) for k, v in self._rows if k == "row"), default=0)
        if self.heading:
            out += [self.heading, ""]
        prev = ""
        prev_empty = False
        for i, (kind, val) in enumerate(self._rows):
            if kind == "title":
                if (i != 0 and prev not in ("title", "line")) or (
                    prev == "line" and not prev_empty
                ):
                    out.append("")
                out += [val if val.endswith(":") else val + ":", ""]
                prev, prev_empty = kind, False
            elif kind == "row":
                label, text = val
                pad = max(longest - len(label) + 2, 0)
                if label == "":
                    out.append(" " * (pad + 1) + " " + text)
                else:
                    out.append(" " * pad + label + ": " + text)
                prev, prev_empty = kind, False
            else:
                if prev == "title" and val is None:
                    continue
                out.append(val or "")
                prev, prev_empty = kind, val is None
        return "\n".join(out) + "\n"


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    title: str = "",
    footer: Sequence[Any] | None = None,
) -> str:
    """A go-pretty rounded table (natscli's default style).

    Cells are left-aligned, except columns whose every cell is an ``int`` (go-pretty
    right-aligns all-number columns); headers stay left-aligned.
    """
    numeric = [
        bool(rows) and all(i < len(r) and isinstance(r[i], int) for r in rows)
        for i in range(max((len(r) for r in rows), default=0))
    ]
    cells = [[str(c) for c in r] for r in rows]
    foot = [str(c) for c in footer] if footer is not None else None
    ncols = max([len(headers), *(len(r) for r in cells)]) if (headers or cells) else 0
    hdr = list(headers) + [""] * (ncols - len(headers))
    cells = [r + [""] * (ncols - len(r)) for r in cells]
    if foot is not None:
        foot += [""] * (ncols - len(foot))
    widths = [
        max([len(hdr[i]), *(len(r[i]) for r in cells), len(foot[i]) if foot else 0])
        for i in range(ncols)
    ]
    inner = sum(widths) + 3 * ncols - 1
    if title and len(title) + 2 > inner:
        widths[-1] += len(title) + 2 - inner
        inner = len(title) + 2

    def sep(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + right

    def line(vals: Sequence[str], data: bool = True) -> str:
        parts = []
        for i, (v, w) in enumerate(zip(vals, widths, strict=True)):
            right = data and i < len(numeric) and numeric[i]
            parts.append(f" {v.rjust(w) if right else v.ljust(w)} ")
        return "│" + "│".join(parts) + "│"

    out: list[str] = []
    if title:
        space = inner - len(title)
        left = space // 2
        out += ["╭" + "─" * inner + "╮", "│" + " " * left + title + " " * (space - left) + "│"]
        out.append(sep("├", "┬", "┤"))
    else:
        out.append(sep("╭", "┬", "╮"))
    if headers:
        out += [line(hdr, data=False), sep("├", "┼", "┤")]
    out += [line(r) for r in cells]
    if foot is not None:
        out += [sep("├", "┼", "┤"), line(foot, data=False)]
    out.append(sep("╰", "┴", "╯"))
    return "\n".join(s.rstrip() for s in out)


def print_json(doc: Any) -> None:
    """Indented JSON as natscli's ``PrintJSON`` (two spaces)."""
    print(json.dumps(doc, indent=2, ensure_ascii=False))
