"""What the real kube-apiserver refuses in an object's content, checked by the fake on writes.

Why: the fake accepted whatever a client wrote, and a harness or test that wrote what the real
server refuses passed on the fake alone: an EndpointSlice holding 127.0.0.1, which
kube-apiserver rejects ("may not be in the loopback range"), let the pool tests pass on the fake
and fail on the real control plane. Where the two disagree the fake is wrong, so the checks
found that way live here.

What is checked: the custom resources whose CRDs the project ships, against their structural
schemas (`schemas`: pruned, defaulted, validated); and the addresses of an EndpointSlice's
endpoints (discovery.k8s.io/v1, `IPv4` or `IPv6` address types): each must be an IP address of
that family and not unspecified, loopback, link-local or link-local multicast, as
kube-apiserver's endpoint IP validation has it (k8s.io/kubernetes pkg/apis/core/validation
`ValidateEndpointIP`, v1.34).

What fails: `admit(resource, obj)` raises `ApiError` 422 (Invalid) naming the field and the
value, as the real server's message does; it returns the object as the server would store it.
Only client writes (create, replace, patch) are admitted: the harness's own `FakeAPI.seed`
stores as a kube controller would, unchecked.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from llmscaler.devcluster.fakeapi import schemas
from llmscaler.devcluster.fakeapi.field_errors import FieldError, FieldType, invalid
from llmscaler.devcluster.fakeapi.resources import Resource

_FAMILIES = {'IPv4': 4, 'IPv6': 6}
_LINK_LOCAL_MULTICAST_V4 = ipaddress.IPv4Network('224.0.0.0/24')


def admit(
    resource: Resource, obj: Any, *, old: Any = None, part: str = 'main', strict: bool = False
) -> Any:
    """`obj` as the real server would store it, or `ApiError` 422 where it would refuse it
    (see the module docstring); `old`, `part` and `strict` as `schemas.admit` takes them."""
    if (resource.group, resource.plural) == ('discovery.k8s.io', 'endpointslices'):
        _check_endpoint_slice(obj)
    return schemas.admit(resource, obj, old=old, part=part, strict=strict)


def _check_endpoint_slice(obj: Any) -> None:
    family = _FAMILIES.get(str(obj.get('addressType'))) if isinstance(obj, dict) else None
    if family is None:
        return  # FQDN slices hold names, and a malformed slice is the store's to refuse
    errors: list[FieldError] = []
    for i, endpoint in enumerate(obj.get('endpoints') or []):
        for j, address in enumerate((endpoint or {}).get('addresses') or []):
            problem = _address_problem(address, family=family)
            if problem is not None:
                field = f'endpoints[{i}].addresses[{j}]'
                errors.append(FieldError(FieldType.INVALID, field, str(address), problem))
    if errors:
        name = str((obj.get('metadata') or {}).get('name', ''))
        raise invalid(kind='EndpointSlice', group='discovery.k8s.io', name=name, errors=errors)


def _address_problem(address: object, *, family: int) -> str | None:
    try:
        ip = ipaddress.ip_address(str(address))
    except ValueError:
        return f'must be a valid IPv{family} address'
    if ip.version != family:
        return f'must be a valid IPv{family} address'
    if ip.is_unspecified:
        return f'may not be unspecified ({address})'
    if ip.is_loopback:
        return 'may not be in the loopback range (127.0.0.0/8, ::1/128)'
    if ip.is_link_local:
        return 'may not be in the link-local range (169.254.0.0/16, fe80::/10)'
    if _link_local_multicast(ip):
        return 'may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)'
    return None


def _link_local_multicast(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """224.0.0.0/24, or an IPv6 multicast address of link-local scope (Go's net.IP test)."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip in _LINK_LOCAL_MULTICAST_V4
    packed = ip.packed
    return packed[0] == 0xFF and packed[1] & 0x0F == 0x02
