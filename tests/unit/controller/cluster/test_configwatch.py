"""Live ConfigMap reload: a rejected ConfigMap keeps its last good copy (a safety rule).

Worked numbers: the built-in kvCacheThreshold is 0.80; the ConfigMaps below set 0.70 (global),
0.60 (the config file's copy) and 0.50 (namespace-local, namespace `team`).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightkube.resources.core_v1 import ConfigMap

from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import (
    QUEUEING_CONFIGMAP,
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
)
from llmscaler.config.resolved import Config, CoreSettings, QueueingModelConfig
from llmscaler.controller.cluster.configwatch import (
    MAX_MESSAGE_CHARS,
    ConfigProblem,
    ConfigWatch,
    configmap_from_object,
)
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import as_dict, make_client

CTRL = 'llmscaler-system'
SETTINGS = CoreSettings(interval=15.0)
SAT = SATURATION_CONFIGMAP
GOOD = {'default': 'kvCacheThreshold: 0.70'}
BROKEN = {'default': 'kvCacheThreshold: [0.5'}  # unclosed flow sequence: not YAML


def obj(name: str, namespace: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {'name': name, 'namespace': namespace, 'resourceVersion': '7'},
        'data': data,
    }


def kv(config: Config, namespace: str = 'ns') -> float:
    return config.model(model_id='m', namespace=namespace).saturation.kv_cache_threshold


def watch(*base: ConfigMapSource) -> ConfigWatch:
    return ConfigWatch(settings=SETTINGS, controller_namespace=CTRL, base=base)


def test_good_then_malformed_then_fixed_then_deleted() -> None:
    w = watch()
    assert kv(w.config) == 0.80
    assert w.config.settings == SETTINGS

    good = w.update(configmaps=[obj(SAT, CTRL, GOOD)])
    assert (good.changed, good.problems, good.kept) == (True, (), ())
    assert kv(good.config) == 0.70
    assert w.config is good.config

    bad = w.update(configmaps=[obj(SAT, CTRL, BROKEN)])
    assert bad.changed is False
    assert kv(bad.config) == 0.70  # the last good copy is still in force
    assert bad.kept == (f'{CTRL}/{SAT}',)
    assert len(bad.problems) == 1
    problem = bad.problems[0]
    assert (problem.namespace, problem.name) == (CTRL, SAT)
    assert problem.message.startswith("key 'default': YAML not accepted (line 1")
    assert '\n' not in problem.message

    still_bad = w.update(configmaps=[obj(SAT, CTRL, BROKEN)])
    assert (still_bad.changed, still_bad.kept) == (False, (f'{CTRL}/{SAT}',))

    fixed = w.update(configmaps=[obj(SAT, CTRL, {'default': 'kvCacheThreshold: 0.65'})])
    assert (fixed.changed, fixed.problems, fixed.kept) == (True, (), ())
    assert kv(fixed.config) == 0.65

    deleted = w.update(configmaps=[])
    assert deleted.changed is True
    assert deleted.config == Config(settings=SETTINGS)


def test_rejected_without_a_previous_copy_is_left_out() -> None:
    w = watch()
    update = w.update(configmaps=[obj(SAT, CTRL, BROKEN)])
    assert update.config == Config(settings=SETTINGS)
    assert (update.changed, update.kept) == (False, ())
    assert [p.name for p in update.problems] == [SAT]


def test_deletion_forgets_the_last_good_copy() -> None:
    w = watch()
    w.update(configmaps=[obj(SAT, CTRL, GOOD)])
    w.update(configmaps=[])
    # Re-created broken: there is no last good copy any more.
    update = w.update(configmaps=[obj(SAT, CTRL, BROKEN)])
    assert kv(update.config) == 0.80
    assert update.kept == ()
    assert len(update.problems) == 1


def test_one_bad_entry_rejects_the_whole_configmap() -> None:
    w = watch()
    w.update(configmaps=[obj(SAT, CTRL, GOOD)])
    data = {'default': 'kvCacheThreshold: 0.55', 'm-override': 'model_id: m\npriority: -1'}
    update = w.update(configmaps=[obj(SAT, CTRL, data)])
    assert kv(update.config) == 0.70  # not 0.55: the valid entry does not leak through
    assert "key 'm-override'" in update.problems[0].message
    assert 'priority' in update.problems[0].message


def test_problems_of_several_entries_join_on_one_line() -> None:
    w = watch()
    data = {'a': 'model_id: m\npriority: -1', 'b': 'model_id: n\nkvCacheThreshold: 2'}
    (problem,) = w.update(configmaps=[obj(SAT, CTRL, data)]).problems
    assert problem.message.startswith("key 'a'")
    assert "; key 'b'" in problem.message
    assert CTRL not in problem.message  # the namespace/name is not repeated in the message


def test_namespace_local_overrides_global_and_keeps_its_own_last_good() -> None:
    w = watch()
    local_good = obj(SAT, 'team', {'default': 'kvCacheThreshold: 0.50'})
    update = w.update(configmaps=[obj(SAT, CTRL, GOOD), local_good])
    assert (kv(update.config, 'team'), kv(update.config, 'other')) == (0.50, 0.70)

    local_bad = obj(SAT, 'team', BROKEN)
    update = w.update(configmaps=[obj(SAT, CTRL, GOOD), local_bad])
    assert (kv(update.config, 'team'), kv(update.config, 'other')) == (0.50, 0.70)
    assert update.kept == (f'team/{SAT}',)
    assert [(p.namespace, p.name) for p in update.problems] == [('team', SAT)]

    # The global one changes while the local one stays broken: both facts hold together.
    update = w.update(
        configmaps=[obj(SAT, CTRL, {'default': 'queueLengthThreshold: 9'}), local_bad]
    )
    model = update.config.model(model_id='m', namespace='team').saturation
    assert (model.kv_cache_threshold, model.queue_length_threshold) == (0.50, 9.0)
    assert kv(update.config, 'other') == 0.80


def test_file_configmaps_apply_beneath_the_cluster() -> None:
    file_global = ConfigMapSource(SAT, CTRL, {'default': 'kvCacheThreshold: 0.60'})
    file_local = ConfigMapSource(SAT, 'team', {'default': 'kvCacheThreshold: 0.50'})
    w = watch(file_global, file_local)
    assert (kv(w.config), kv(w.config, 'team')) == (0.60, 0.50)

    update = w.update(configmaps=[obj(SAT, CTRL, GOOD)])  # replaces the file's global copy
    assert (kv(update.config), kv(update.config, 'team')) == (0.70, 0.50)

    update = w.update(configmaps=[obj(SAT, CTRL, BROKEN)])
    assert kv(update.config) == 0.70  # the cluster's last good copy, not the file's

    update = w.update(configmaps=[])  # the cluster's copy is gone: the file's shows again
    assert (kv(update.config), kv(update.config, 'team')) == (0.60, 0.50)
    assert update.changed is True

    update = w.update(configmaps=[obj(SAT, CTRL, BROKEN)])  # no cluster copy was ever good
    assert (kv(update.config), update.kept) == (0.60, ())


def test_other_configmaps_and_non_configmaps_are_ignored() -> None:
    w = watch()
    update = w.update(
        configmaps=[
            obj('kube-root-ca.crt', CTRL, {'ca.crt': 'not yaml: ['}),
            obj('wva-manager-config', CTRL, {'GLOBAL_OPT_INTERVAL': 'nonsense'}),
            {'kind': 'Secret', 'metadata': {'name': SAT, 'namespace': CTRL}, 'data': BROKEN},
            {'kind': 'ConfigMap', 'metadata': {'namespace': CTRL}, 'data': BROKEN},
        ]
    )
    assert (update.config, update.changed, update.problems) == (
        Config(settings=SETTINGS),
        False,
        (),
    )


def test_non_string_data_is_a_problem() -> None:
    w = watch()
    w.update(configmaps=[obj(SAT, CTRL, GOOD)])
    data = {'default': 'kvCacheThreshold: 0.55', 'other': 5}
    update = w.update(configmaps=[obj(SAT, CTRL, data)])
    assert kv(update.config) == 0.70
    assert "key 'other', value '5'" in update.problems[0].message
    assert 'must be strings' in update.problems[0].message


def test_warnings_do_not_reject_and_are_reported() -> None:
    w = watch()
    stz = obj(SCALE_TO_ZERO_CONFIGMAP, CTRL, {'default': 'retention_period: 48h'})
    update = w.update(configmaps=[stz])
    assert update.problems == ()
    assert update.config.model(model_id='m', namespace='ns').scale_to_zero.retention_period == (
        48 * 3600.0
    )
    assert [(w.namespace, w.name) for w in update.warnings] == [(CTRL, SCALE_TO_ZERO_CONFIGMAP)]
    assert 'longer than 24h' in update.warnings[0].message


def test_conflicts_found_only_when_combined_are_warnings() -> None:
    w = watch()
    local = obj(SAT, 'team', {'default': 'kvSpareTrigger: 0.75'})  # fine alone (0.80 ≥ 0.75)
    update = w.update(configmaps=[obj(SAT, CTRL, GOOD), local])
    assert update.problems == ()
    assert update.warnings == (
        ConfigProblem(
            namespace='team',
            name=SAT,
            message="key 'default', field 'kvCacheThreshold' = '0.7': merged kvCacheThreshold "
            '0.7 is below kvSpareTrigger 0.75; this entry is ignored',
        ),
    )


def test_file_problems_are_not_repeated_as_warnings() -> None:
    file_cm = ConfigMapSource(SAT, CTRL, {'default': 'priority: -1'})
    update = watch(file_cm).update(configmaps=[])
    assert (update.warnings, update.problems) == ((), ())


def test_all_three_configmaps_reload() -> None:
    w = watch()
    update = w.update(
        configmaps=[
            obj(SAT, CTRL, GOOD),
            obj(SCALE_TO_ZERO_CONFIGMAP, CTRL, {'default': 'enable_scale_to_zero: true'}),
            obj(QUEUEING_CONFIGMAP, CTRL, {'default': 'sloMultiplier: 4'}),
        ]
    )
    model = update.config.model(model_id='m', namespace='ns')
    assert model.scale_to_zero.enabled is True
    assert model.queueing == QueueingModelConfig(slo_multiplier=4.0)
    bad_queueing = obj(QUEUEING_CONFIGMAP, CTRL, {'default': 'sloMultiplier: 0.5'})
    update = w.update(configmaps=[obj(SAT, CTRL, GOOD), bad_queueing])
    model = update.config.model(model_id='m', namespace='ns')
    assert model.scale_to_zero.enabled is None  # deleted
    assert model.queueing == QueueingModelConfig(slo_multiplier=4.0)  # kept


def test_configmap_from_object_defaults_and_shapes() -> None:
    source, errors = configmap_from_object(
        obj={'metadata': {'name': SAT}, 'data': None}, default_namespace=CTRL
    )
    assert (source, errors) == (ConfigMapSource(SAT, CTRL, {}), ())
    source, errors = configmap_from_object(
        obj={'metadata': {'name': SAT, 'namespace': 'x'}, 'data': ['a']}, default_namespace=CTRL
    )
    assert source == ConfigMapSource(SAT, 'x', {})
    assert [e.message for e in errors] == ['data must be a mapping of strings']
    bad: object
    for bad in (None, [], {'kind': 'Pod'}, {'metadata': 'x'}, {'metadata': {'name': 3}}):
        assert configmap_from_object(obj=bad, default_namespace=CTRL) == (None, ())


async def test_objects_listed_from_the_api_server_apply() -> None:
    async with FakeAPI() as api:
        api.seed(obj(SAT, CTRL, GOOD))
        api.seed(obj(SAT, 'team', BROKEN))
        client = make_client(server=api.url)
        try:
            listed = [as_dict(cm) async for cm in client.list(ConfigMap, namespace='*')]
        finally:
            await client.aclose()
    update = watch().update(configmaps=listed)
    assert kv(update.config) == 0.70
    assert [(p.namespace, p.name) for p in update.problems] == [('team', SAT)]


# -- properties ---------------------------------------------------------------------------------

# Versions of each ConfigMap's `default` entry; the scale-to-zero ConfigMap has its own texts.
SATURATION_TEXT = {
    'good-a': 'kvCacheThreshold: 0.70',
    'good-b': 'kvCacheThreshold: 0.60\nqueueLengthThreshold: 2',
    'broken': 'kvCacheThreshold: [0.5',
    'invalid': 'kvCacheThreshold: 1.5',
}
SCALE_TO_ZERO_TEXT = {
    'good-a': 'enable_scale_to_zero: true',
    'good-b': 'retention_period: 5m',
    'broken': 'retention_period: [',
    'invalid': 'retention_period: 10',  # no unit
}
KEYS = ((CTRL, SAT), ('team', SAT), (CTRL, SCALE_TO_ZERO_CONFIGMAP))
GOOD_VERSIONS = frozenset({'good-a', 'good-b'})


def sources(state: dict[tuple[str, str], str]) -> list[ConfigMapSource]:
    result = []
    for (namespace, name), version in state.items():
        texts = SCALE_TO_ZERO_TEXT if name == SCALE_TO_ZERO_CONFIGMAP else SATURATION_TEXT
        if version in texts:
            result.append(ConfigMapSource(name, namespace, {'default': texts[version]}))
    return result


states = st.lists(
    st.fixed_dictionaries(
        {key: st.sampled_from(['absent', *sorted(SATURATION_TEXT)]) for key in KEYS}
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(sequence=states, data=st.data())
def test_model_of_last_good_copies(
    sequence: list[dict[tuple[str, str], str]], data: st.DataObject
) -> None:
    """The config in force is always `build_config` of the newest good version of each listed
    ConfigMap (seen since it last appeared), whatever order the informer lists them in."""
    w = watch()
    last_good: dict[tuple[str, str], str] = {}
    previous = w.config
    for state in sequence:
        listed = [obj(s.name, s.namespace, dict(s.data)) for s in sources(state)]
        update = w.update(configmaps=data.draw(st.permutations(listed)))
        for key, version in state.items():
            if version == 'absent':
                last_good.pop(key, None)
            elif version in GOOD_VERSIONS:
                last_good[key] = version
        expected, _ = build_config(
            configmaps=sources(last_good), settings=SETTINGS, controller_namespace=CTRL
        )
        assert update.config == expected
        rejected = {key for key, version in state.items() if version in ('broken', 'invalid')}
        assert {(p.namespace, p.name) for p in update.problems} == rejected
        assert set(update.kept) == {f'{ns}/{name}' for ns, name in rejected & set(last_good)}
        assert update.changed == (update.config != previous)
        previous = update.config


# -- hostile ConfigMaps -------------------------------------------------------------------------

# Each made the reload raise (ValueError, RecursionError) or cost without bound (aliases).
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + ''.join(
    f'{b}: &{b} [{", ".join([f"*{a}"] * 9)}]\n' for a, b in zip('abcdefgh', 'bcdefghi', strict=True)
)
HOSTILE = {
    'date out of range': 'kvCacheThreshold: 2001-13-45',
    'tagged float': 'kvCacheThreshold: !!float 0.5-',
    'tagged int': 'kvCacheThreshold: !!int "7x"',
    '5,000 digits': 'queueLengthThreshold: ' + '9' * 5000,
    '20,000 [': '[' * 20_000,
    'alias bomb': ALIAS_BOMB,
}


def one_line(problem: ConfigProblem) -> str:
    assert '\n' not in problem.message
    assert len(problem.message) <= MAX_MESSAGE_CHARS
    return problem.message


@pytest.mark.parametrize('name', sorted(HOSTILE))
def test_hostile_tenant_configmap_is_its_own_problem(name: str) -> None:
    w = watch()
    local_good = obj(SAT, 'team', {'default': 'kvCacheThreshold: 0.50'})
    w.update(configmaps=[obj(SAT, CTRL, GOOD), local_good])
    poisoned = obj(SAT, 'team', {'default': HOSTILE[name]})
    update = w.update(configmaps=[obj(SAT, CTRL, GOOD), poisoned])
    assert [(p.namespace, p.name) for p in update.problems] == [('team', SAT)]
    assert len(one_line(update.problems[0])) < 300  # the value itself is never in it
    assert update.kept == (f'team/{SAT}',)
    assert (kv(update.config, 'team'), kv(update.config, 'other')) == (0.50, 0.70)

    # Later edits of the global ConfigMap still apply while the tenant's stays poisoned.
    edited = obj(SAT, CTRL, {'default': 'kvCacheThreshold: 0.65'})
    update = w.update(configmaps=[edited, poisoned])
    assert (kv(update.config, 'team'), kv(update.config, 'other')) == (0.50, 0.65)
    assert [(p.namespace, p.name) for p in update.problems] == [('team', SAT)]


class Exploding(dict[str, Any]):
    """A mapping that fails when read: what no informer should hand over, but might."""

    def items(self) -> Any:
        raise RuntimeError('boom')

    def __iter__(self) -> Any:
        raise RuntimeError('boom')


def test_an_object_that_raises_when_read_is_that_configmaps_problem() -> None:
    w = watch()
    w.update(configmaps=[obj(SAT, 'team', {'default': 'kvCacheThreshold: 0.50'})])
    broken = obj(SAT, 'team', {})
    broken['data'] = Exploding(default='kvCacheThreshold: 0.40')
    odd: list[Any] = [Exploding(), 7, None, obj(SAT, CTRL, GOOD), broken]
    update = w.update(configmaps=odd)
    assert [(p.namespace, p.name) for p in update.problems] == [('team', SAT)]
    assert (
        one_line(update.problems[0]) == 'could not be read (unexpected RuntimeError); not applied'
    )
    assert (kv(update.config, 'team'), kv(update.config, 'other')) == (0.50, 0.70)


def test_many_problems_are_cut_to_an_event_sized_line() -> None:
    data = {f'm{i:03}': f'model_id: m{i}\npriority: -1' for i in range(200)}
    (problem,) = watch().update(configmaps=[obj(SAT, CTRL, data)]).problems
    text = one_line(problem)
    assert text.startswith(
        "key 'm000', field 'priority' = '-1': must be in [0, 1000000]; key 'm001'"
    )
    assert text.endswith(' more problems')


def test_secret_looking_data_values_are_never_shown() -> None:
    data: dict[str, Any] = {'default': 'kvCacheThreshold: 0.5', 'api-token': 12345}
    (problem,) = watch().update(configmaps=[obj(SAT, CTRL, data)]).problems
    assert one_line(problem) == (
        "key 'api-token': ConfigMap data keys and values must be strings (quote the value)"
    )


# Mutations of a valid entry: random text, deep nesting, random scalars under random tags.
VALID_TEXT = 'kvCacheThreshold: 0.70\nqueueLengthThreshold: 3\nanalyzers: [{name: a, score: 1}]'
TAGS = ['', '!!str', '!!int', '!!float', '!!bool', '!!null', '!!timestamp', '!!binary', '!!set']
TAGS += ['!!omap', '!!python/name:os.system', '!custom', '!!seq', '!!map', '&x', '*x']
SCALARS = ['2001-13-45', '0.5-', '"7x"', '9' * 5000, '.nan', '-.inf', '1e999', '0x1F', '1:30']
SCALARS += ['yes', '~', '"\\x00"', '[', '{', ']', '|', '>', "'", '"', '', '<<', '=', '0b2']


def insert(text: str, index: int, piece: str) -> str:
    at = index % (len(text) + 1)
    return text[:at] + piece + text[at:]


mutations = st.one_of(
    st.text(max_size=200),
    st.builds(
        lambda opener, depth: opener * depth,
        st.sampled_from(['[', '{', '- ', '{a: ']),
        st.integers(0, 30_000),
    ),
    st.builds(
        lambda field, tag, scalar: f'{field}: {tag} {scalar}',
        st.sampled_from(['kvCacheThreshold', 'analyzers', 'scaleToZero', 'model_id', 'x']),
        st.sampled_from(TAGS),
        st.sampled_from(SCALARS) | st.text(max_size=30),
    ),
    st.builds(insert, st.just(VALID_TEXT), st.integers(0, 200), st.sampled_from(TAGS + SCALARS)),
    st.builds(insert, st.just(VALID_TEXT), st.integers(0, 200), st.text(max_size=10)),
)


@settings(max_examples=150, deadline=None)
@given(text=mutations, local=st.booleans())
def test_mutated_configmaps_never_raise_nor_replace_the_last_good_copy(
    text: str, local: bool
) -> None:
    namespace = 'team' if local else CTRL
    w = watch()
    good = obj(SAT, namespace, {'default': VALID_TEXT})
    other = obj(SCALE_TO_ZERO_CONFIGMAP, CTRL, {'default': 'enable_scale_to_zero: true'})
    before = w.update(configmaps=[good, other]).config
    update = w.update(configmaps=[obj(SAT, namespace, {'default': text}), other])
    if update.problems:
        assert [(p.namespace, p.name) for p in update.problems] == [(namespace, SAT)]
        one_line(update.problems[0])
        assert update.config == before  # the last good copy stays in force
        assert update.kept == (f'{namespace}/{SAT}',)
    else:
        alone = ConfigMapSource(SAT, namespace, {'default': text})
        expected, _ = build_config(
            configmaps=[alone, ConfigMapSource(SCALE_TO_ZERO_CONFIGMAP, CTRL, dict(other['data']))],
            settings=SETTINGS,
            controller_namespace=CTRL,
        )
        assert update.config == expected
    assert update.config.model(model_id='m', namespace='ns').scale_to_zero.enabled is True
