"""`devcluster.host`: this machine's address an EndpointSlice may hold, or why there is none."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from llmscaler.devcluster import host
from tests.support.prerequisites import missing


def test_the_address_is_routable_and_its_absence_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        address = ipaddress.IPv4Address(host.host_address())
    except host.NoHostAddress as none:
        missing(str(none))  # a prerequisite of the real backend's tests: fails with CI=true
    assert not address.is_loopback
    assert not address.is_link_local
    assert not address.is_unspecified
    monkeypatch.setattr(socket, 'if_nameindex', lambda: [(1, 'lo')])
    with pytest.raises(host.NoHostAddress, match=r'no IPv4 address .*\(lo 127\.0\.0\.1\)'):
        host.host_address()
