"""pytest's configuration of the tests of test_gateway.py: they are async,
on anyio's pytest plugin (which the mcp package brings), on asyncio."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
