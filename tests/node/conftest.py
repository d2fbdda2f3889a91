"""Fixtures shared by the node tests."""

from __future__ import annotations

import pytest

from node.server import Server
from tests.support.monitor import populated_server


@pytest.fixture
def populated() -> Server:
    """A monitoring test server: three open clients and one closed one."""
    return populated_server()
