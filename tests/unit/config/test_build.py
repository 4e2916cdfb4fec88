"""Resolution of the ConfigMap layers into `Config` (as WVA v0.9.0 layers them, internal/config/).

Layers, least to most specific: built-in < global default < namespace-local default
< global model entry (no namespace) < global model entry for the namespace < local model entry.
"""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.config.build import apply_overrides, build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import (
    QUEUEING_CONFIGMAP,
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
    SaturationOverrides,
)
from llmscaler.config.resolved import (
    Config,
    CoreSettings,
    ModelConfig,
    QueueingModelConfig,
    SaturationConfig,
    ScaleToZeroConfig,
)

CTRL = 'wva-system'
SETTINGS = CoreSettings(interval=15.0)


def cm(name: str, namespace: str, **data: str) -> ConfigMapSource:
    return ConfigMapSource(name=name, namespace=namespace, data=data)


def sat(namespace: str, **data: str) -> ConfigMapSource:
    return cm(SATURATION_CONFIGMAP, namespace, **data)


def build(*configmaps: ConfigMapSource) -> tuple[Config, list[str]]:
    config, errors = build_config(
        configmaps=list(configmaps), settings=SETTINGS, controller_namespace=CTRL
    )
    return config, [str(e) for e in errors]


def test_no_configmaps_gives_builtin_defaults() -> None:
    config, errors = build()
    assert errors == []
    assert config == Config(settings=SETTINGS)
    model = config.model(model_id='m', namespace='ns')
    assert model.saturation == SaturationConfig()
    assert model.scale_to_zero == ScaleToZeroConfig(enabled=None, retention_period=None)
    assert model.queueing is None


def test_apply_overrides_only_touches_set_fields() -> None:
    base = SaturationConfig(priority=4.0)
    merged = apply_overrides(base=base, overrides=SaturationOverrides(kv_cache_threshold=0.0))
    assert merged == replace(base, kv_cache_threshold=0.0)
    assert apply_overrides(base=base, overrides=SaturationOverrides()) is base


def test_seed_000_override_merges_onto_default() -> None:
    config, errors = build(
        sat(
            CTRL,
            default='analyzerName: saturation\nkvCacheThreshold: 0.75\npriority: 2',
            **{
                'llama-override': (
                    'model_id: meta/llama-3.1-8b\nnamespace: llm-inference\n'
                    'scaleUpThreshold: 0.90\nscaleDownBoundary: 0.75'
                )
            },
        )
    )
    assert errors == []
    llama = config.model(model_id='meta/llama-3.1-8b', namespace='llm-inference').saturation
    assert llama == SaturationConfig(
        kv_cache_threshold=0.75,
        priority=2.0,
        analyzer_name='saturation',
        scale_up_threshold=0.90,
        scale_down_boundary=0.75,
    )
    assert llama.analyzer_path == 'saturation-token'
    # Same model elsewhere, and another model: only the default applies.
    other = config.model(model_id='meta/llama-3.1-8b', namespace='other').saturation
    assert other == SaturationConfig(
        kv_cache_threshold=0.75, priority=2.0, analyzer_name='saturation'
    )
    assert config.by_group[0][0] == 'meta/llama-3.1-8b|llm-inference'


def test_full_precedence_chain() -> None:
    config, errors = build(
        sat(
            CTRL,
            default='priority: 2\nqueueSpareTrigger: 4',
            wild='model_id: m\npriority: 3\nqueueLengthThreshold: 7',
            exact='model_id: m\nnamespace: team\npriority: 4\nkvSpareTrigger: 0.05',
        ),
        sat(
            'team',
            default='priority: 10\nqueueSpareTrigger: 9\nkvCacheThreshold: 0.6',
            local='model_id: m\npriority: 5',
        ),
    )
    assert errors == []
    in_team = config.model(model_id='m', namespace='team').saturation
    # priority: 2 → 10 (local default) → 3 (wild) → 4 (exact) → 5 (local entry) = 5
    assert in_team.priority == 5.0
    assert in_team.queue_spare_trigger == 9.0  # local default beats the global default
    assert in_team.kv_cache_threshold == 0.6  # local default
    assert in_team.queue_length_threshold == 7.0  # wildcard model entry
    assert in_team.kv_spare_trigger == 0.05  # exact global entry
    elsewhere = config.model(model_id='m', namespace='prod').saturation
    assert (elsewhere.priority, elsewhere.queue_length_threshold) == (3.0, 7.0)
    assert elsewhere.queue_spare_trigger == 4.0
    other_in_team = config.model(model_id='x', namespace='team').saturation
    assert (other_in_team.priority, other_in_team.queue_spare_trigger) == (10.0, 9.0)
    assert other_in_team.queue_length_threshold == 5.0  # built-in
    assert [key for key, _ in config.by_namespace] == ['team']
    assert [key for key, _ in config.by_model] == ['m']
    assert [key for key, _ in config.by_group] == ['m|team']


def test_wildcard_entry_is_preresolved_for_namespaces_with_local_configmaps() -> None:
    # Lookup is by_group → by_model → by_namespace: without a pre-resolved group the wildcard
    # entry (by_model) would hide the namespace-local default.
    config, errors = build(
        sat(CTRL, wild='model_id: m\nqueueLengthThreshold: 7'),
        cm(SCALE_TO_ZERO_CONFIGMAP, 'team', default='enable_scale_to_zero: true'),
    )
    assert errors == []
    model = config.model(model_id='m', namespace='team')
    assert model.saturation.queue_length_threshold == 7.0
    assert model.scale_to_zero.enabled is True
    assert config.model(model_id='m', namespace='prod').scale_to_zero.enabled is None


def test_explicit_zero_and_false_override() -> None:
    config, errors = build(
        sat(
            CTRL,
            default='enableLimiter: true\nqueueLengthThreshold: 5\nscaleToZero: {enabled: true}',
            **{
                'm#ns': (
                    'enableLimiter: false\nqueueLengthThreshold: 0\nscaleToZero: {enabled: false}'
                )
            },
        )
    )
    assert errors == []
    model = config.model(model_id='m', namespace='ns').saturation
    assert model.enable_limiter is False
    assert model.queue_length_threshold == 0.0
    assert model.scale_to_zero_enabled is False


def test_inverted_thresholds_after_merge_reset_to_defaults() -> None:
    config, errors = build(
        sat(
            CTRL,
            default='scaleUpThreshold: 0.8\nscaleDownBoundary: 0.6',
            **{'m#ns': 'scaleDownBoundary: 0.8'},
        )
    )
    model = config.model(model_id='m', namespace='ns').saturation
    # Merged 0.8 / 0.8 is not up > down, so both go back to 0.85 / 0.70.
    assert (model.scale_up_threshold, model.scale_down_boundary) == (0.85, 0.70)
    assert config.default.saturation.scale_up_threshold == 0.8
    assert errors == [
        "wva-system/wva-saturation-scaling-config: key 'm#ns', field 'scaleUpThreshold' = "
        "'0.8': merged scaleUpThreshold 0.8 must be greater than scaleDownBoundary 0.8; "
        'both reset to 0.85/0.7'
    ]


def test_merged_kv_below_spare_trigger_skips_that_layer() -> None:
    config, errors = build(
        sat(CTRL, default='kvSpareTrigger: 0.3', **{'m#ns': 'kvCacheThreshold: 0.2\npriority: 9'})
    )
    model = config.model(model_id='m', namespace='ns').saturation
    # 0.2 < 0.3: the whole m#ns entry is ignored, so priority stays 1.0 as well.
    assert (model.kv_cache_threshold, model.kv_spare_trigger, model.priority) == (0.8, 0.3, 1.0)
    assert len(errors) == 1
    assert "key 'm#ns', field 'kvCacheThreshold'" in errors[0]


def test_scale_to_zero_layers_and_unset_values() -> None:
    config, errors = build(
        cm(
            SCALE_TO_ZERO_CONFIGMAP,
            CTRL,
            default='retention_period: 5m',
            a='model_id: m\nenable_scale_to_zero: true',
        ),
    )
    assert errors == []
    assert config.default.scale_to_zero == ScaleToZeroConfig(enabled=None, retention_period=300.0)
    m = config.model(model_id='m', namespace='any').scale_to_zero
    assert m == ScaleToZeroConfig(enabled=True, retention_period=300.0)


def test_queueing_only_where_a_queueing_configmap_applies() -> None:
    config, errors = build(
        cm(
            QUEUEING_CONFIGMAP,
            'team',
            default='sloMultiplier: 4',
            slo='model_id: m\ntargetTTFT: 500\ntargetITL: 100',
        )
    )
    assert errors == []
    assert config.model(model_id='x', namespace='prod').queueing is None
    assert config.model(model_id='x', namespace='team').queueing == QueueingModelConfig(
        slo_multiplier=4.0
    )
    assert config.model(model_id='m', namespace='team').queueing == QueueingModelConfig(
        slo_multiplier=4.0, target_ttft=500.0, target_itl=100.0
    )
    glob, _ = build(cm(QUEUEING_CONFIGMAP, CTRL))
    assert glob.model(model_id='x', namespace='prod').queueing == QueueingModelConfig()


def test_namespace_local_entry_cannot_name_another_namespace() -> None:
    config, errors = build(
        sat('team', a='model_id: m\nnamespace: prod\npriority: 5', b='model_id: m\npriority: 6'),
    )
    assert config.model(model_id='m', namespace='team').saturation.priority == 6.0
    assert config.model(model_id='m', namespace='prod').saturation.priority == 1.0
    assert errors == [
        "team/wva-saturation-scaling-config: key 'a', field 'namespace' = 'prod': "
        "a namespace-local ConfigMap applies only to namespace 'team'"
    ]


def test_namespace_local_duplicates_first_key_wins() -> None:
    config, errors = build(
        sat('team', a='model_id: m\npriority: 5', b='model_id: m\nnamespace: team\npriority: 6'),
    )
    assert config.model(model_id='m', namespace='team').saturation.priority == 5.0
    assert len(errors) == 1
    assert "key 'b'" in errors[0]


def test_unknown_configmaps_ignored_and_duplicates_reported() -> None:
    config, errors = build(
        cm('kube-root-ca.crt', CTRL, **{'ca.crt': 'xyz'}),
        sat(CTRL, default='priority: 3'),
        sat(CTRL, default='priority: 2'),
    )
    # Copies are ordered by their data; 'priority: 2' sorts first and is kept.
    assert config.default.saturation.priority == 2.0
    assert errors == [
        'wva-system/wva-saturation-scaling-config: ConfigMap given twice; one copy is used'
    ]


def test_bad_entries_are_reported_and_the_rest_loads() -> None:
    config, errors = build(sat(CTRL, default='priority: 3', **{'m#ns': 'kvCacheThreshold: 7'}))
    assert config.default.saturation.priority == 3.0
    assert config.model(model_id='m', namespace='ns').saturation.kv_cache_threshold == 0.8
    assert len(errors) == 1


# --- properties -------------------------------------------------------------------------------

MODELS = ('m1', 'm2')
NAMESPACES = (CTRL, 'a', 'b')
VALUES = (0.0, 0.5, 1.0, 2.0)


@st.composite
def configmap_sets(draw: st.DrawFn) -> list[ConfigMapSource]:
    result = []
    for namespace in NAMESPACES:
        for name in (SATURATION_CONFIGMAP, SCALE_TO_ZERO_CONFIGMAP, QUEUEING_CONFIGMAP):
            if not draw(st.booleans()):
                continue
            data: dict[str, str] = {}
            keys = draw(
                st.lists(st.sampled_from(['default', 'm1', 'm2', 'm1@a', 'm2@b']), unique=True)
            )
            for key in keys:
                model, _, ns = key.partition('@')
                head = '' if key == 'default' else f'model_id: {model}\n'
                head += f'namespace: {ns}\n' if ns else ''
                if name == SATURATION_CONFIGMAP:
                    body = f'priority: {draw(st.sampled_from(VALUES))}'
                elif name == SCALE_TO_ZERO_CONFIGMAP:
                    body = f'enable_scale_to_zero: {draw(st.sampled_from(["true", "false"]))}'
                else:
                    body = f'sloMultiplier: {draw(st.sampled_from([1.5, 3.0]))}'
                data[key] = head + body
            result.append(ConfigMapSource(name=name, namespace=namespace, data=data))
    return result


def expected_priority(configmaps: list[ConfigMapSource], model: str, namespace: str) -> float:
    """Brute force: walk the five layers in order and keep the last priority that applies."""
    value = 1.0
    sats = [c for c in configmaps if c.name == SATURATION_CONFIGMAP]
    glob = [c for c in sats if c.namespace == CTRL]
    local = [c for c in sats if c.namespace == namespace and namespace != CTRL]

    def prio(c: ConfigMapSource, key: str) -> float | None:
        text = c.data.get(key)
        return None if text is None else float(text.rsplit(' ', 1)[1])

    layers: list[float | None] = []
    layers += [prio(c, 'default') for c in glob]
    layers += [prio(c, 'default') for c in local]
    layers += [prio(c, model) for c in glob]
    layers += [prio(c, f'{model}@{namespace}') for c in glob]
    # In a local ConfigMap an entry for this model with or without the namespace is the same
    # layer; the first key in sort order wins ('m1' < 'm1@a').
    for c in local:
        found = [p for p in (prio(c, model), prio(c, f'{model}@{namespace}')) if p is not None]
        layers.append(found[0] if found else None)
    for item in layers:
        if item is not None:
            value = item
    return value


@settings(max_examples=60, deadline=None)
@given(configmap_sets(), st.randoms(use_true_random=False))
def test_shuffled_input_gives_the_same_config(
    configmaps: list[ConfigMapSource], rnd: random.Random
) -> None:
    first = build_config(configmaps=configmaps, settings=SETTINGS, controller_namespace=CTRL)
    shuffled = list(configmaps)
    rnd.shuffle(shuffled)
    second = build_config(configmaps=shuffled, settings=SETTINGS, controller_namespace=CTRL)
    assert first == second


@settings(max_examples=60, deadline=None)
@given(configmap_sets())
def test_lookup_equals_brute_force_chain(configmaps: list[ConfigMapSource]) -> None:
    config, _ = build_config(configmaps=configmaps, settings=SETTINGS, controller_namespace=CTRL)
    for model in (*MODELS, 'unknown'):
        for namespace in (*NAMESPACES, 'c'):
            got = config.model(model_id=model, namespace=namespace)
            assert isinstance(got, ModelConfig)
            assert got.saturation.priority == expected_priority(configmaps, model, namespace)
            has_qm = any(
                c.name == QUEUEING_CONFIGMAP and c.namespace in (CTRL, namespace)
                for c in configmaps
            )
            assert (got.queueing is not None) == has_qm
    keys = [key for key, _ in config.by_group]
    assert keys == sorted(keys)
