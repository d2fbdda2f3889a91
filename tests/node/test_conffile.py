"""node.conffile: the NATS configuration format."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from node.conffile import ConfFileError, parse, parse_file, to_plain


def p(text: str, **kw: object) -> dict[str, object]:
    return to_plain(parse(text, "t.conf", env=kw.get("env", {})))  # type: ignore[arg-type]


def test_separators_and_comments() -> None:
    text = "a: 1\nb = 2\nc 3\n# comment\n// another\nd: 4 # trailing\ne = 5; f = 6, g: 7\n"
    assert p(text) == {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7}


def test_blocks_all_forms() -> None:
    text = "x { a: 1 }\ny: { b: 2 }\nz = { c: 3, d: 4; e 5\n f: 6 }\n"
    assert p(text) == {"x": {"a": 1}, "y": {"b": 2}, "z": {"c": 3, "d": 4, "e": 5, "f": 6}}


def test_whole_file_in_braces() -> None:
    assert p('{\n "port": 4222,\n "host": "h"\n}\n') == {"port": 4222, "host": "h"}


def test_arrays_commas_newlines_comments() -> None:
    text = "a: [1, 2, 3]\nb: [\n  x # c\n  y,\n  'z'\n]\nc: []\n"
    assert p(text) == {"a": [1, 2, 3], "b": ["x", "y", "z"], "c": []}


def test_strings() -> None:
    text = 'a: \'raw \\n\'\nb: "esc \\t\\"\\\\ \\x41"\nc: bare-string\nd: nats://h:4222\n'
    assert p(text) == {"a": "raw \\n", "b": 'esc \t"\\ A', "c": "bare-string", "d": "nats://h:4222"}


def test_booleans_any_case_and_quoted_are_strings() -> None:
    text = "a: true\nb: FALSE\nc: yes\nd: No\ne: on\nf: OFF\ng: 'true'\n"
    assert p(text) == {
        "a": True,
        "b": False,
        "c": True,
        "d": False,
        "e": True,
        "f": False,
        "g": "true",
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1K", 1000),
        ("1k", 1000),
        ("1KB", 1024),
        ("1kb", 1024),
        ("1Ki", 1024),
        ("1KiB", 1024),
        ("256MB", 256 * 1024**2),
        ("2M", 2_000_000),
        ("1GB", 1024**3),
        ("1G", 10**9),
        ("1TB", 1024**4),
        ("1T", 10**12),
        ("-1", -1),
        ("0", 0),
    ],
)
def test_sizes(text: str, value: int) -> None:
    assert p(f"v: {text}\n") == {"v": value}


def test_numbers_floats_ips_and_number_like_strings() -> None:
    text = 'f: 1.5\nip: 127.0.0.1\nhp: 127.0.0.1:4222\nd: 500ms\ns: 1s\nq: "2m"\nu: 2m\n'
    assert p(text) == {
        "f": 1.5,
        "ip": "127.0.0.1",
        "hp": "127.0.0.1:4222",
        "d": "500ms",
        "s": "1s",
        "q": "2m",
        "u": 2_000_000,  # unquoted 2m is 2 mega, as in nats-server
    }


def test_datetime_and_block() -> None:
    out = p("t: 2024-01-02T03:04:05Z\nb: (\nline1\nline2\n)\n")
    assert out["t"] == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert out["b"] == "\nline1\nline2"


def test_variables_block_scoped_and_marked_used() -> None:
    text = "A: 1\nm { A: 2, x: $A }\ny: $A\n"
    parsed = parse(text, "t.conf", env={})
    assert to_plain(parsed) == {"A": 1, "m": {"A": 2, "x": 2}, "y": 1}
    assert parsed["A"].used_as_variable
    assert not parsed["y"].used_as_variable


def test_env_variables_are_parsed_as_values() -> None:
    assert p("port: $PORT\nname: $NAME\n", env={"PORT": "4333", "NAME": "n1"}) == {
        "port": 4333,
        "name": "n1",
    }


def test_bcrypt_is_not_a_variable() -> None:
    assert p("pw: $2a$11$abcdef\n") == {"pw": "$2a$11$abcdef"}


def test_undefined_variable_is_an_error_with_location() -> None:
    with pytest.raises(ConfFileError) as ei:
        parse("a: 1\n  b: $NOPE\n", "t.conf", env={})
    assert str(ei.value).startswith("t.conf:2:")
    assert "NOPE" in str(ei.value) and "can not be found" in str(ei.value)


def test_env_cycle_is_an_error() -> None:
    with pytest.raises(ConfFileError, match="cycle"):
        parse("a: $X\n", "t.conf", env={"X": "$Y", "Y": "$X"})


def test_positions_point_at_keys() -> None:
    parsed = parse("a: 1\n  b {\n    c: 2\n  }\n", "t.conf", env={})
    assert (parsed["a"].line, parsed["a"].col) == (1, 1)
    assert parsed["b"].where == "t.conf:2:3"
    assert parsed["b"].value["c"].where == "t.conf:3:5"


def test_include_relative_to_including_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "auth.conf").write_text("user: bob\npass: 'pw'\n")
    (tmp_path / "main.conf").write_text(
        "port: 1\nauthorization {\n  include ./sub/auth.conf\n}\ninclude 'sub/top.conf'\n"
    )
    (tmp_path / "sub" / "top.conf").write_text("debug: true\n")
    out = to_plain(parse_file(tmp_path / "main.conf", env={}))
    assert out == {"port": 1, "authorization": {"user": "bob", "pass": "pw"}, "debug": True}


def test_include_error_names_the_included_file(tmp_path: Path) -> None:
    (tmp_path / "bad.conf").write_text("ok: 1\nx: [1,\n")
    (tmp_path / "main.conf").write_text("include bad.conf\n")
    with pytest.raises(ConfFileError) as ei:
        parse_file(tmp_path / "main.conf", env={})
    assert ei.value.file.endswith("bad.conf")


def test_missing_include(tmp_path: Path) -> None:
    (tmp_path / "main.conf").write_text("\ninclude nope.conf\n")
    with pytest.raises(ConfFileError, match=r"main.conf:2:1: error opening include file"):
        parse_file(tmp_path / "main.conf", env={})


def test_missing_file() -> None:
    with pytest.raises(ConfFileError, match="error opening config file"):
        parse_file("/nonexistent/x.conf")


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ("a: 1.5s\n", "t.conf:1:7", "top-level value to end"),
        ("a = \n4222\n", "t.conf:1:5", "Expected value but found new line"),
        ("a: [1, 2\n", "t.conf:2:1", "EOF processing array"),
        ("a { b: 1\n", "t.conf:2:1", "EOF processing map"),
        ('a: "open\n', "t.conf:2:1", "EOF"),
        ("a: 1kbb\n", "t.conf:1:4", "invalid size suffix"),
        ('a: "\\q"\n', "t.conf:1:6", "Invalid escape"),
        ("a: .5\n", "t.conf:1:4", "Floats must start with a digit"),
        (": 1\n", "t.conf:1:1", "Unexpected key separator"),
        ("a: [, 1]\n", "t.conf:1:5", "array value terminator"),
        ("a: 99999999999999999999\n", "t.conf:1:4", "out of the range"),
        ("a\n", "t.conf:1:1", "has no value"),
    ],
)
def test_syntax_errors(text: str, where: str, what: str) -> None:
    with pytest.raises(ConfFileError) as ei:
        parse(text, "t.conf", env={})
    msg = str(ei.value)
    assert msg.startswith(where + ": "), msg
    assert what in msg


def test_key_without_separator_may_continue_on_next_line() -> None:
    # nats-server quirk kept: "port\n 4222" is port = 4222.
    assert p("port\n 4222\n") == {"port": 4222}


def test_redefined_key_keeps_last_value() -> None:
    assert p("a: 1\na: 2\n") == {"a": 2}
