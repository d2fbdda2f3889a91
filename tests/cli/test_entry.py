"""The ``trijet`` entry point hands natscli-shaped command lines to the client."""

from __future__ import annotations

import pytest

import node.cli
import trijet_cli.main


@pytest.mark.parametrize(
    "argv",
    [
        ["stream", "ls"],
        ["--server", "nats://127.0.0.1:1", "stream", "ls"],
        ["-s", "nats://127.0.0.1:1", "stream", "ls"],
    ],
)
def test_client_commands_and_leading_connection_flags(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []

    def fake(args: list[str]) -> int:
        seen.append(list(args))
        return 0

    monkeypatch.setattr(trijet_cli.main, "main", fake)
    assert node.cli.main(argv) == 0
    assert seen == [argv]


def test_unknown_command_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert node.cli.main(["nonsense"]) == 2
    assert "unknown command 'nonsense'" in capsys.readouterr().err
