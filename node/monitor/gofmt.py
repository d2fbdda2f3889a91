"""Go-shaped text for monitoring JSON: times, durations, uptimes, floats.

Theory of operation: nats-server marshals Go values, so clients and dashboards
parse Go's spellings.  These pure helpers reproduce them:

* ``go_time`` — ``time.Time`` as JSON: RFC 3339 in UTC with up to nine
  fractional digits, trailing zeros dropped (``2024-05-01T10:00:00.1234Z``);
  the zero time is ``0001-01-01T00:00:00Z``.
* ``go_duration`` — ``time.Duration.String()``: ``0s``, ``617µs``,
  ``1.5ms``, ``2m3.5s``, ``1h0m0s``.
* ``uptime`` — nats-server's ``myUptime``: whole seconds in
  ``[Ny][Nd][Nh][Nm]Ns`` form (``1m2s``, ``2d3h4m5s``).
* ``dumps`` — ``json.MarshalIndent(v, "", "  ")``: two-space indent, no
  trailing newline, non-ASCII kept (``µs``), integral floats written as
  integers (Go writes ``2.0`` as ``2``).
"""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

NS_PER_S = 1_000_000_000
GO_ZERO_TIME = "0001-01-01T00:00:00Z"
_FLOAT_AS_INT_MAX = 1e21  # Go switches to exponent form at 1e21


def wall_ns(wall_s: float) -> int:
    """Epoch seconds (float) to integer nanoseconds."""
    return round(wall_s * NS_PER_S)


def go_time(wall_s: float | None) -> str:
    """Format epoch seconds as Go's JSON ``time.Time`` in UTC (``None`` → zero time)."""
    if wall_s is None:
        return GO_ZERO_TIME
    secs, ns = divmod(wall_ns(wall_s), NS_PER_S)
    dt = datetime.datetime.fromtimestamp(secs, tz=datetime.UTC)
    frac = f"{ns:09d}".rstrip("0")
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ("." + frac if frac else "") + "Z"


def _frac(v: int, prec: int) -> str:
    digits = f"{v:0{prec}d}".rstrip("0")
    return "." + digits if digits else ""


def go_duration(ns: int) -> str:
    """Go's ``time.Duration.String()`` for ``ns`` nanoseconds."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < NS_PER_S:
        if u < 1_000:
            return f"{sign}{u}ns"
        if u < 1_000_000:
            return f"{sign}{u // 1_000}{_frac(u % 1_000, 3)}µs"
        return f"{sign}{u // 1_000_000}{_frac(u % 1_000_000, 6)}ms"
    whole, frac_ns = divmod(u, NS_PER_S)
    out = f"{whole % 60}{_frac(frac_ns, 9)}s"
    mins = whole // 60
    if mins:
        out = f"{mins % 60}m" + out
        hours = mins // 60
        if hours:
            out = f"{hours}h" + out
    return sign + out


def go_duration_s(seconds: float) -> str:
    """``go_duration`` for a span given in (float) seconds."""
    return go_duration(round(seconds * NS_PER_S))


def rtt_string(rtt_s: float) -> str:
    """A connection's RTT as nats-server shows it (µs-truncated below 1 ms)."""
    ns = round(rtt_s * NS_PER_S)
    if 1_000 < ns < 1_000_000:
        ns -= ns % 1_000
    return go_duration(ns)


def uptime(seconds: float) -> str:
    """nats-server's ``myUptime``: whole seconds as ``[Ny][Nd][Nh][Nm]Ns``."""
    tsecs = max(int(seconds), 0)
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
    return f"{tsecs}s"


def _goify(v: Any) -> Any:
    if isinstance(v, float):
        if math.isfinite(v) and v.is_integer() and abs(v) < _FLOAT_AS_INT_MAX:
            return int(v)
        return v
    if isinstance(v, dict):
        return {k: _goify(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_goify(x) for x in v]
    return v


def dumps(value: Any, *, indent: bool = True) -> bytes:
    """Encode like Go's ``json.MarshalIndent(v, "", "  ")`` (or ``json.Marshal``)."""
    if indent:
        text = json.dumps(_goify(value), indent=2, ensure_ascii=False)
    else:
        text = json.dumps(_goify(value), separators=(",", ":"), ensure_ascii=False)
    # Go's encoder escapes these for HTML safety (only inside strings: they
    # are never JSON syntax)
    if "<" in text or ">" in text or "&" in text or "\u2028" in text or "\u2029" in text:
        text = text.translate(_GO_HTML_ESCAPES)
    return text.encode()


_GO_HTML_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}
