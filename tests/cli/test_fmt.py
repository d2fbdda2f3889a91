"""natscli's value formatting and layouts, exactly (the goldens collapse table padding)."""

from __future__ import annotations

import datetime as dt

from trijet_cli.fmt import Columns, comma, duration, ibytes, parse_time, table


def test_values() -> None:
    assert comma(1234567) == "1,234,567" and comma(0) == "0"
    assert [ibytes(n) for n in (0, 9, 10, 170, 1023, 1536, 20000, 1 << 20, 256_000)] == [
        "0 B",
        "9 B",
        "10 B",
        "170 B",
        "1023 B",
        "1.5 KiB",
        "20 KiB",
        "1.0 MiB",
        "250 KiB",
    ]
    s = 10**9
    assert duration(120 * s) == "2m0s"
    assert duration(30 * s) == "30.00s"
    assert duration(1_490_000_000) == "1.49s"
    assert duration(12_345_678) == "12ms"
    assert duration(1_500) == "2µs"
    assert duration(3 * 3600 * s + 61 * s) == "3h1m1s"
    assert duration(2 * 86400 * s) == "2d0h0m0s"
    assert duration((1 << 63) - 1) == "never"
    t = parse_time("2026-11-25T15:26:41.913546123Z")
    assert t == dt.datetime(2026, 11, 25, 15, 26, 41, 913546, tzinfo=dt.UTC)
    assert parse_time("0001-01-01T00:00:00Z") is None


def test_columns_layout() -> None:
    c = Columns("Information for Stream X created 2026-01-02 03:04:05")
    c.row("Subjects", ["a", "b"])
    c.row("Replicas", 3)
    c.title("Options")
    c.row("Duplicate Window", "2m0s")
    c.row("", "continued")
    c.line()
    c.title("State")
    c.row("Messages", 12345)
    assert c.render() == (
        "Information for Stream X created 2026-01-02 03:04:05\n"
        "\n"
        "          Subjects: a, b\n"
        "          Replicas: 3\n"
        "\n"
        "Options:\n"
        "\n"
        "  Duplicate Window: 2m0s\n"
        "                    continued\n"
        "\n"
        "State:\n"
        "\n"
        "          Messages: 12,345\n"
    )


def test_table_layout() -> None:
    out = table(
        ["Name", "Count", "Size"],
        [["ORDERS", 3, "153 B"], ["X", 12, "0 B"]],
        "Streams",
        ["", "15", ""],
    )
    assert out == "\n".join(
        [
            "╭" + "─" * 24 + "╮",
            "│" + " " * 8 + "Streams" + " " * 9 + "│",
            "├────────┬───────┬───────┤",
            "│ Name   │ Count │ Size  │",
            "├────────┼───────┼───────┤",
            "│ ORDERS │     3 │ 153 B │",
            "│ X      │    12 │ 0 B   │",
            "├────────┼───────┼───────┤",
            "│        │ 15    │       │",
            "╰────────┴───────┴───────╯",
        ]
    )
