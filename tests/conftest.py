"""Fixtures every test directory shares: a fake kube-apiserver, and an API client to it.

A test module that needs the server seeded or configured otherwise defines its own `api`, which
takes precedence over this one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from lightkube import AsyncClient

from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import make_client


@pytest.fixture
async def api() -> AsyncIterator[FakeAPI]:
    """A fake kube-apiserver on 127.0.0.1, empty, stopped after the test."""
    async with FakeAPI() as server:
        yield server


@pytest.fixture
async def client(api: FakeAPI) -> AsyncIterator[AsyncClient]:
    """The controller's API client to `api`, closed after the test."""
    made = make_client(server=api.url, timeout=5)
    try:
        yield made
    finally:
        await made.aclose()
