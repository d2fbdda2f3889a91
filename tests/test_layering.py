"""Enforce DESIGN.md rule 5: lower layers never reach up.

Import direction is ``node -> cluster -> (raft, store)``; ``raft`` and ``store``
import nothing of ours; ``chaos`` and ``pipeline`` may import anything and
nothing imports them; ``trijet_cli`` (the client tool) imports nothing of ours but
itself, and only ``node/cli.py`` dispatches to it.  Imports are read with ``ast`` (including imports inside
functions and ``TYPE_CHECKING`` blocks), so a lazy import cannot dodge the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("node", "cluster", "raft", "store", "chaos", "pipeline", "trijet_cli")

ALLOWED: dict[str, set[str]] = {
    "node": {"node", "cluster", "raft", "store", "trijet_cli"},
    "cluster": {"cluster", "raft", "store"},
    "raft": {"raft"},
    "store": {"store"},
    "chaos": set(ROOMS),
    "pipeline": set(ROOMS),
    # the client tool speaks only the public protocol: nothing of the server
    "trijet_cli": {"trijet_cli"},
}


def _imported_rooms(path: Path, room: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in ROOMS:
                    found.append((node.lineno, top))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import stays inside its own room
                found.append((node.lineno, room))
            elif node.module:
                top = node.module.split(".")[0]
                if top in ROOMS:
                    found.append((node.lineno, top))
    return found


def _room_files(room: str) -> list[Path]:
    return sorted((ROOT / room).rglob("*.py"))


@pytest.mark.parametrize("room", ROOMS)
def test_room_imports_follow_direction(room: str) -> None:
    bad = []
    for path in _room_files(room):
        for lineno, target in _imported_rooms(path, room):
            if target not in ALLOWED[room]:
                bad.append(f"{path.relative_to(ROOT)}:{lineno} imports {target}")
    assert not bad, "wrong import direction:\n" + "\n".join(bad)


def test_every_room_is_a_package() -> None:
    for room in ROOMS:
        init = ROOT / room / "__init__.py"
        assert init.is_file(), f"{room}/ is not a package"
        assert ast.get_docstring(ast.parse(init.read_text())), (
            f"{room}/__init__.py lacks a docstring"
        )


def test_checker_catches_a_wrong_edge(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("import node.session\nfrom cluster import api\nfrom . import x\n")
    rooms = [t for _, t in _imported_rooms(bad, "store")]
    assert rooms == ["node", "cluster", "store"]
