"""The `limiters:` list (GPU inventory and quotas): validation with one-line errors, and limits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import SATURATION_CONFIGMAP
from llmscaler.config.quota import LimiterInvalid, Limiters, Quota, parse_limiters
from llmscaler.config.resolved import CoreSettings
from llmscaler.domain.snapshot import GpuLimit
from llmscaler.optimize.constraints import merge_constraints

CTRL = 'llmscaler-system'


def test_the_inventory_and_a_quota_with_namespace_pools() -> None:
    limiters = parse_limiters(
        [
            {'type': 'gpu-inventory'},
            {
                'type': 'quota',
                'quotas': {'A100': 16, 'L4': -1},
                'namespaceQuotas': {'team-a': {'A100': 4}},
            },
        ]
    )
    assert limiters == Limiters(
        inventory=True,
        quota=Quota(
            quotas=(('A100', 16), ('L4', -1)), namespace_quotas=(('team-a', (('A100', 4),)),)
        ),
    )
    assert limiters.quota_limits(namespaces=['team-a', 'team-b']) == (
        GpuLimit(provider='quota', accelerator='A100', limit=16),
        GpuLimit(provider='quota', accelerator='L4', limit=-1),
        GpuLimit(provider='quota', accelerator='A100', limit=4, namespace='team-a'),
    )


def test_a_namespace_scoped_quota_gives_every_namespace_its_own_pool() -> None:
    limiters = parse_limiters(
        [
            {
                'name': 'quota',
                'scope': 'namespace',
                'quotas': {'A100': 2},
                'namespaceQuotas': {'big': {'A100': 8}},
            }
        ]
    )
    assert not limiters.inventory
    budgets = merge_constraints(limits=limiters.quota_limits(namespaces=['a', 'b', 'big']))
    assert budgets.available(accelerator='A100', namespace='a') == 2
    assert budgets.available(accelerator='A100', namespace='big') == 8
    # A pool is a closed allow-list: types it does not list are denied.
    assert budgets.available(accelerator='H100', namespace='a') == 0


def test_an_empty_list_names_no_provider() -> None:
    assert parse_limiters([]) == Limiters(inventory=False, quota=None)


@pytest.mark.parametrize(
    ('value', 'path', 'message'),
    [
        ('inventory', '', 'must be a list, not a string'),
        (['inventory'], '[0]', 'must be a mapping, not a string'),
        ([{'type': 'gpu'}], '[0].type', "type must be 'gpu-inventory'"),
        ([{'type': 'quota', 'name': 'inventory'}], '[0]', 'type and name differ'),
        ([{'type': 'inventory'}, {'type': 'gpu-inventory'}], '[1].type', 'listed twice'),
        ([{'type': 'inventory', 'quotas': {}}], '[0].quotas', 'unknown field'),
        ([{'type': 'quota', 'exclude': ['x']}], '[0].exclude', 'unknown field'),
        ([{'type': 'quota', 'scope': 'zone'}], '[0].scope', "'cluster' or 'namespace'"),
        ([{'type': 'quota', 'quotas': [1]}], '[0].quotas', 'must be a mapping'),
        ([{'type': 'quota', 'quotas': {'A100': 1.5}}], '[0].quotas.A100', 'whole number'),
        ([{'type': 'quota', 'quotas': {'A100': True}}], '[0].quotas.A100', 'not a boolean'),
        ([{'type': 'quota', 'quotas': {'A100': -2}}], '[0].quotas.A100', 'must be in [-1,'),
        ([{'type': 'quota', 'quotas': {'A100': 2**31}}], '[0].quotas.A100', 'must be in [-1,'),
        ([{'type': 'quota', 'quotas': {'': 1}}], '[0].quotas', 'non-empty string'),
        ([{'type': 'quota', 'namespaceQuotas': {'a': 3}}], '[0].namespaceQuotas.a', 'mapping'),
    ],
)
def test_bad_values_are_refused_with_a_path(value: object, path: str, message: str) -> None:
    with pytest.raises(LimiterInvalid) as caught:
        parse_limiters(value)
    assert caught.value.path == path
    assert message in caught.value.message
    assert '\n' not in caught.value.message


@given(st.integers(min_value=-1, max_value=2**31 - 1))
def test_every_count_in_range_is_kept(count: int) -> None:
    limiters = parse_limiters([{'type': 'quota', 'quotas': {'A100': count}}])
    assert limiters.quota_limits(namespaces=()) == (
        GpuLimit(provider='quota', accelerator='A100', limit=count),
    )


def _build(*configmaps: ConfigMapSource) -> tuple[Limiters | None, list[str]]:
    config, errors = build_config(
        configmaps=list(configmaps), settings=CoreSettings(), controller_namespace=CTRL
    )
    return config.default.saturation.limiters, [str(e) for e in errors]


def test_the_global_default_entry_sets_the_limiters() -> None:
    text = 'enableLimiter: true\nlimiters:\n  - type: quota\n    quotas: {A100: 4}\n'
    limiters, errors = _build(ConfigMapSource(SATURATION_CONFIGMAP, CTRL, {'default': text}))
    assert errors == []
    assert limiters == Limiters(inventory=False, quota=Quota(quotas=(('A100', 4),)))


def test_a_bad_limiters_list_rejects_the_entry_with_one_line() -> None:
    text = 'limiters:\n  - type: quota\n    quotas: {A100: lots}\n'
    limiters, errors = _build(ConfigMapSource(SATURATION_CONFIGMAP, CTRL, {'default': text}))
    assert limiters is None
    (error,) = errors
    assert "field 'limiters[0].quotas.A100' = 'lots'" in error
    assert 'whole number of GPUs' in error
    assert '\n' not in error


def test_a_tenant_configmap_cannot_set_limiters() -> None:
    text = 'limiters: []\n'
    limiters, errors = _build(ConfigMapSource(SATURATION_CONFIGMAP, 'tenant', {'default': text}))
    assert limiters is None
    (error,) = errors
    assert 'read only from the global default entry' in error
