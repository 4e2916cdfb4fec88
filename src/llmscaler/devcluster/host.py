"""This machine's own address, for what the real API server must reach through an endpoint.

Why: the real kube-apiserver refuses loopback (and link-local) addresses in an EndpointSlice, yet
the development cluster serves everything on this machine: an InferencePool's endpoint picker,
an extension API server behind an APIService (KEDA's metrics server). Those are served on this
machine's first routable IPv4 address instead, which the API server (on the same machine)
reaches as well.

What: `host_address()` walks the interfaces in their kernel order and returns the first IPv4
address that is not loopback, link-local, multicast or unspecified.

What fails: `NoHostAddress`, naming every interface and address seen, when there is none (a
machine with loopback alone): nothing served here can then be reached through an EndpointSlice.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from typing import Final

_SIOCGIFADDR: Final = 0x8915  # Linux: an interface's IPv4 address


class NoHostAddress(RuntimeError):
    """The machine has no IPv4 address an EndpointSlice may hold (only loopback, link-local)."""


def _interface_ipv4(interface: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            answer = fcntl.ioctl(
                sock.fileno(), _SIOCGIFADDR, struct.pack('256s', interface.encode()[:15])
            )
        except OSError:  # down, or no IPv4 address
            return None
    return socket.inet_ntoa(answer[20:24])


def host_address() -> str:
    """The first IPv4 address of this machine's interfaces that an endpoint may hold: not
    loopback, link-local, multicast or unspecified (the API server refuses those)."""
    seen = []
    for _, interface in socket.if_nameindex():
        address = _interface_ipv4(interface)
        if address is None:
            continue
        seen.append(f'{interface} {address}')
        ip = ipaddress.IPv4Address(address)
        if not (ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified):
            return address
    raise NoHostAddress(
        'no IPv4 address other than loopback or link-local on this machine '
        f'({", ".join(seen) or "none"}): the real API server refuses those in an EndpointSlice, '
        'so nothing served here can be reached through one'
    )
