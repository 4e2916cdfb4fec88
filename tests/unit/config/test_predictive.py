"""`llmscaler-predictive-config`: parsing, validation, layering, live reload and `--config`.

The shared keys (targets, sloMultiplier, tuningEnabled, perfParms) must behave exactly as in
`wva-queueing-model-config`, since one parser reads both; the predictive keys have their own
ranges. A key an entry does not set keeps the built-in default (`PredictiveConfig()`).
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import (
    QUEUEING_CONFIGMAP,
    QueueingOverrides,
    parse_queueing_configmap,
)
from llmscaler.config.errors import ConfigError
from llmscaler.config.file import load_config_file
from llmscaler.config.predictive import (
    PREDICTIVE_CONFIGMAP,
    PredictiveOverrides,
    parse_predictive_configmap,
    sizing_for,
)
from llmscaler.config.resolved import Config, CoreSettings, PredictiveConfig, QueueingModelConfig
from llmscaler.controller.cluster.configwatch import SCALING_CONFIGMAPS, ConfigWatch
from tests.support.paths import ROOT

CTRL = 'wva-system'
SETTINGS = CoreSettings()
H100 = (
    'perfParms:\n'
    '  - acc: H100\n'
    '    decodeParms: {alpha: 6.5, beta: 0.04}\n'
    '    prefillParms: {gamma: 21, delta: 0.0004}\n'
)


def source(data: dict[str, str], namespace: str = CTRL) -> ConfigMapSource:
    return ConfigMapSource(name=PREDICTIVE_CONFIGMAP, namespace=namespace, data=data)


def build(*configmaps: ConfigMapSource) -> tuple[Config, list[str]]:
    config, errors = build_config(
        configmaps=list(configmaps), settings=SETTINGS, controller_namespace=CTRL
    )
    return config, [str(e) for e in errors]


def only_error(errors: tuple[ConfigError, ...]) -> ConfigError:
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


# --- parsing ----------------------------------------------------------------------------------


def test_default_and_per_model_entries_with_shared_and_own_keys() -> None:
    data = {
        'default': 'sloMultiplier: 4\nstartupSeconds: 90\nforecastQuantile: 0.9',
        'llama': (
            'model_id: meta/llama-3.1-8b\nnamespace: llm\ntargetTTFT: 1000\ntargetITL: 50\n'
            'scaleDownDelaySeconds: 5m\nlatencyMargin: 1\nhistorySeconds: "1h"\n'
            'sloAttainment: 0.95\n' + H100
        ),
        'other#team': 'tuningEnabled: false\nscaleDownDelaySeconds: 0',
    }
    (default, llama, other), errors = parse_predictive_configmap(source=source(data))
    assert errors == ()
    assert default.values == PredictiveOverrides(
        slo=QueueingOverrides(slo_multiplier=4.0), startup_seconds=90.0, quantile=0.9
    )
    assert (llama.model_id, llama.namespace) == ('meta/llama-3.1-8b', 'llm')
    assert llama.values == PredictiveOverrides(
        slo=QueueingOverrides(
            target_ttft=1000.0,
            target_itl=50.0,
            perf_parms=(('H100', (6.5, 0.04, 21.0, 0.0004)),),
        ),
        scale_down_delay=300.0,
        latency_margin=1.0,
        history_seconds=3600.0,
        attainment=0.95,
    )
    assert (other.model_id, other.namespace) == ('other', 'team')
    assert other.values == PredictiveOverrides(
        slo=QueueingOverrides(tuning_enabled=False), scale_down_delay=0.0
    )


@pytest.mark.parametrize(
    ('text', 'seconds'),
    [('120', 120.0), ('2.5', 2.5), ('"2m"', 120.0), ('1m30s', 90.0), ('"1500ms"', 1.5)],
)
def test_durations_are_seconds_or_go_durations(text: str, seconds: float) -> None:
    (entry,), errors = parse_predictive_configmap(
        source=source({'default': f'startupSeconds: {text}'})
    )
    assert errors == ()
    assert entry.values.startup_seconds == seconds


@pytest.mark.parametrize(
    ('text', 'field', 'message'),
    [
        ('startupSeconds: 0', 'startupSeconds', 'must be in (0, 86400] seconds'),
        ('startupSeconds: -5', 'startupSeconds', 'must be in (0, 86400]'),
        ('startupSeconds: .nan', 'startupSeconds', 'must be in (0, 86400]'),
        ('startupSeconds: .inf', 'startupSeconds', 'must be in (0, 86400]'),
        ('startupSeconds: 1e999', 'startupSeconds', 'must be in (0, 86400]'),
        ('startupSeconds: 86401', 'startupSeconds', 'must be in (0, 86400]'),
        ('startupSeconds: "0s"', 'startupSeconds', 'must be in (0, 86400]'),
        ('startupSeconds: "25h"', 'startupSeconds', 'must be in (0, 86400]'),
        ('startupSeconds: "120"', 'startupSeconds', 'has no unit'),
        ('startupSeconds: "-1m"', 'startupSeconds', 'negative duration'),
        ('startupSeconds: true', 'startupSeconds', 'not a boolean'),
        ('startupSeconds: [1]', 'startupSeconds', 'not a list'),
        ('startupSeconds: null', 'startupSeconds', 'not null'),
        ('forecastQuantile: 0.5', 'forecastQuantile', 'must be in (0.5, 1)'),
        ('forecastQuantile: 1', 'forecastQuantile', 'must be in (0.5, 1)'),
        ('forecastQuantile: 1.0', 'forecastQuantile', 'must be in (0.5, 1)'),
        ('forecastQuantile: .nan', 'forecastQuantile', 'must be in (0.5, 1)'),
        ('forecastQuantile: "0.9"', 'forecastQuantile', 'not a string'),
        ('scaleDownDelaySeconds: -1', 'scaleDownDelaySeconds', 'must be in [0, 86400]'),
        ('scaleDownDelaySeconds: .inf', 'scaleDownDelaySeconds', 'must be in [0, 86400]'),
        ('latencyMargin: 0', 'latencyMargin', 'must be in (0, 1]'),
        ('latencyMargin: 1.01', 'latencyMargin', 'must be in (0, 1]'),
        ('latencyMargin: -.inf', 'latencyMargin', 'must be in (0, 1]'),
        ('historySeconds: 0', 'historySeconds', 'must be in (0, 86400]'),
        ('sloAttainment: 1', 'sloAttainment', 'must be in (0.5, 1)'),
        ('sloAttainment: 0.5', 'sloAttainment', 'must be in (0.5, 1)'),
        ('sloAttainment: 99', 'sloAttainment', 'must be in (0.5, 1)'),
        ('sloAttainment: .nan', 'sloAttainment', 'must be in (0.5, 1)'),
        ('historySeconds: "2d"', 'historySeconds', 'unknown unit'),
        ('periodic: on', 'periodic', 'must be auto or off, not a boolean'),
        ('periodic: true', 'periodic', 'must be auto or off, not a boolean'),
        ('periodic: "daily"', 'periodic', 'must be auto or off'),
        ('periodic: 1', 'periodic', 'must be auto or off, not int'),
        ('periodic: null', 'periodic', 'must be auto or off, not null'),
        ('periodSeconds: 59', 'periodSeconds', 'must be in [60, 86400] seconds'),
        ('periodSeconds: "30s"', 'periodSeconds', 'must be in [60, 86400] seconds'),
        ('periodSeconds: 86401', 'periodSeconds', 'must be in [60, 86400] seconds'),
        ('periodSeconds: .nan', 'periodSeconds', 'must be in [60, 86400] seconds'),
        ('periodSeconds: "1d"', 'periodSeconds', 'unknown unit'),
        ('periodSeconds: "10"', 'periodSeconds', 'has no unit'),
        ('periodSeconds: false', 'periodSeconds', 'not a boolean'),
        ('horizonSeconds: 60', 'horizonSeconds', 'unknown field'),
        # The shared keys keep the queueing map's rules.
        ('sloMultiplier: 1', 'sloMultiplier', 'must be in (1, 100]'),
        ('targetTTFT: 500', 'targetTTFT', 'set together'),
        ('targetTTFT: 500\ntargetITL: .inf', 'targetITL', 'finite'),
        ('tuningEnabled: "yes"', 'tuningEnabled', 'true or false'),
        (H100.replace('beta: 0.04', 'beta: 0'), 'perfParms[0].decodeParms.beta', '(0, 3600000]'),
    ],
)
def test_a_bad_key_rejects_the_entry_naming_map_key_field_and_model(
    text: str, field: str, message: str
) -> None:
    data = {'default': 'startupSeconds: 60', 'llama': f'model_id: meta/llama\n{text}'}
    (kept,), errors = parse_predictive_configmap(source=source(data))
    assert kept.key == 'default'  # the good entry still loads
    error = only_error(errors)
    assert (error.key, error.field) == ('llama', field)
    assert message in error.message
    line = str(error)
    assert line.startswith(f"{CTRL}/{PREDICTIVE_CONFIGMAP}: key 'llama', field '{field}'")
    assert line.endswith(" (model 'meta/llama')")
    assert '\n' not in line
    # A `{modelID}#{namespace}` key names the model and its namespace too.
    _, model_errors = parse_predictive_configmap(source=source({'meta/llama#llm': text}))
    assert str(only_error(model_errors)).startswith(
        f"{CTRL}/{PREDICTIVE_CONFIGMAP}: key 'meta/llama#llm', field '{field}'"
    )
    assert str(only_error(model_errors)).endswith(" (model 'meta/llama' in namespace 'llm')")


def test_every_bad_key_of_an_entry_is_reported() -> None:
    text = 'startupSeconds: 0\nforecastQuantile: 2\nlatencyMargin: 0\nsloMultiplier: 0.5'
    entries, errors = parse_predictive_configmap(source=source({'default': text}))
    assert entries == ()
    assert sorted(e.field for e in errors) == [
        'forecastQuantile',
        'latencyMargin',
        'sloMultiplier',
        'startupSeconds',
    ]


SHARED_VALUES = st.sampled_from(
    ['1', '1.5', '3', '100', '101', '0', '-1', '.nan', '.inf', 'true', '"x"', '[1]', '{}', '500']
)
SHARED_KEYS = st.sampled_from(['sloMultiplier', 'tuningEnabled', 'targetTTFT', 'targetITL'])


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(SHARED_KEYS, SHARED_VALUES, max_size=4),
    st.sampled_from(['default', 'm#ns', 'x']),
)
def test_shared_keys_behave_exactly_as_in_the_queueing_map(
    fields: dict[str, str], key: str
) -> None:
    """One parser: the same text gives the same values and the same errors in both maps."""
    text = '\n'.join(f'{name}: {value}' for name, value in sorted(fields.items()))
    queueing, q_errors = parse_queueing_configmap(
        source=ConfigMapSource(name=QUEUEING_CONFIGMAP, namespace=CTRL, data={key: text})
    )
    predictive, p_errors = parse_predictive_configmap(source=source({key: text}))
    assert [e.values for e in queueing] == [e.values.slo for e in predictive]
    # The predictive map's errors also name the entry's model; the rest is the same.
    model = '' if key in ('default', 'x') else " (model 'm' in namespace 'ns')"
    assert [(e.key, e.field, e.value, e.message + model) for e in q_errors] == [
        (e.key, e.field, e.value, e.message) for e in p_errors
    ]
    assert all(e.values == PredictiveOverrides(slo=e.values.slo) for e in predictive)


OWN = {
    'startupSeconds': lambda x: 0 < x <= 86400,
    'forecastQuantile': lambda x: 0.5 < x < 1,
    'scaleDownDelaySeconds': lambda x: 0 <= x <= 86400,
    'latencyMargin': lambda x: 0 < x <= 1,
    'historySeconds': lambda x: 0 < x <= 86400,
    'sloAttainment': lambda x: 0.5 < x < 1,
    'attainmentTarget': lambda x: 0.5 < x < 1,
    'periodSeconds': lambda x: 60 <= x <= 86400,
}


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(OWN)),
    st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, 0.5, 1.0, 86400.0, 86400.5, -0.0, 0.5000001, 0.9999999])
    | st.integers(-10, 100_000).map(float),
)
def test_own_keys_accept_exactly_their_range(name: str, number: float) -> None:
    text = f'{name}: {number!r}'.replace('nan', '.nan').replace('inf', '.inf')
    entries, errors = parse_predictive_configmap(source=source({'default': text}))
    accepted = OWN[name](number) and math.isfinite(number)
    assert (len(entries), len(errors)) == ((1, 0) if accepted else (0, 1))
    if not accepted:
        assert only_error(errors).field == name


@pytest.mark.parametrize(
    ('text', 'mode', 'period'),
    [
        ('periodic: auto', 'auto', None),
        ('periodic: "off"', 'off', None),
        # YAML reads an unquoted off as false: the same mode.
        ('periodic: off', 'off', None),
        ('periodic: false', 'off', None),
        ('periodSeconds: 60', None, 60.0),
        ('periodSeconds: "24h"', None, 86400.0),
        ('periodic: auto\nperiodSeconds: 10m', 'auto', 600.0),
    ],
)
def test_the_recurrence_keys(text: str, mode: str | None, period: float | None) -> None:
    (entry,), errors = parse_predictive_configmap(source=source({'default': text}))
    assert errors == ()
    assert (entry.values.periodic, entry.values.period_seconds) == (mode, period)
    resolved = entry.values.over(PredictiveConfig())
    assert resolved.periodic == (mode or PredictiveConfig().periodic)
    assert resolved.period_seconds == period


@given(st.dictionaries(st.text(max_size=12), st.text(max_size=80), max_size=5))
def test_never_raises_and_accounts_for_every_key(data: dict[str, str]) -> None:
    entries, errors = parse_predictive_configmap(source=source(data))
    accepted = {entry.key for entry in entries}
    rejected = {error.key for error in errors}
    assert accepted | rejected == set(data)
    assert accepted.isdisjoint(rejected)


# --- layering ---------------------------------------------------------------------------------


def test_predictive_only_where_the_map_applies() -> None:
    config, errors = build()
    assert (errors, config.model(model_id='m', namespace='ns').predictive) == ([], None)
    config, errors = build(source({'default': 'startupSeconds: 60'}, namespace='team'))
    assert errors == []
    assert config.model(model_id='m', namespace='prod').predictive is None
    assert config.model(model_id='m', namespace='team').predictive == PredictiveConfig(
        startup_seconds=60.0
    )
    config, _ = build(source({}))  # an empty global map: every model, built-in settings
    assert config.model(model_id='m', namespace='prod').predictive == PredictiveConfig()
    assert config.model(model_id='m', namespace='prod').queueing is None


def test_layers_from_global_default_to_namespace_local_model_entry() -> None:
    glob = source(
        {
            'default': 'startupSeconds: 60\nforecastQuantile: 0.9\nsloMultiplier: 5',
            'm-everywhere': 'model_id: m\nforecastQuantile: 0.8\nhistorySeconds: 600',
            'm-team': 'model_id: m\nnamespace: team\nlatencyMargin: 0.5',
        }
    )
    local = source(
        {'default': 'scaleDownDelaySeconds: 30', 'm': 'model_id: m\nstartupSeconds: 45'},
        namespace='team',
    )
    config, errors = build(glob, local)
    assert errors == []
    assert config.model(model_id='x', namespace='prod').predictive == PredictiveConfig(
        slo=QueueingModelConfig(slo_multiplier=5.0), startup_seconds=60.0, quantile=0.9
    )
    assert config.model(model_id='m', namespace='prod').predictive == PredictiveConfig(
        slo=QueueingModelConfig(slo_multiplier=5.0),
        startup_seconds=60.0,
        quantile=0.8,
        history_seconds=600.0,
    )
    assert config.model(model_id='m', namespace='team').predictive == PredictiveConfig(
        slo=QueueingModelConfig(slo_multiplier=5.0),
        startup_seconds=45.0,
        quantile=0.8,
        scale_down_delay=30.0,
        latency_margin=0.5,
        history_seconds=600.0,
    )


def test_an_attainment_target_sets_what_it_implies_and_explicit_keys_win() -> None:
    config, errors = build(
        source(
            {
                'default': 'attainmentTarget: 0.95',
                'strict': 'model_id: strict\nattainmentTarget: 0.999',
                'pinned': 'model_id: pinned\nattainmentTarget: 0.999\nforecastQuantile: 0.9',
            }
        )
    )
    assert errors == []
    lax = config.model(model_id='m', namespace='ns').predictive
    strict = config.model(model_id='strict', namespace='ns').predictive
    pinned = config.model(model_id='pinned', namespace='ns').predictive
    assert lax is not None
    assert strict is not None
    assert pinned is not None
    assert (lax.attainment, strict.attainment) == (0.95, 0.999)
    # A stricter target sizes for more: a higher quantile, less of each target for the mean.
    assert lax.quantile < PredictiveConfig().quantile < strict.quantile
    assert lax.latency_margin > PredictiveConfig().latency_margin > strict.latency_margin
    assert (pinned.quantile, pinned.latency_margin) == (0.9, strict.latency_margin)


@pytest.mark.parametrize('target', [0.51, 0.9, 0.95, 0.99, 0.995, 0.999, 0.99999])
def test_the_default_target_implies_the_defaults_and_every_target_stays_in_range(
    target: float,
) -> None:
    quantile, margin = sizing_for(target)
    assert 0.5 < quantile < 1
    assert 0 < margin <= 1
    if target == 0.99:
        defaults = PredictiveConfig()
        assert quantile == pytest.approx(defaults.quantile)
        assert margin == pytest.approx(defaults.latency_margin)


def test_targets_per_model_entry_over_service_class_over_default() -> None:
    classes = ConfigMapSource(
        name='service-classes-config',
        namespace=CTRL,
        data={
            'premium': 'name: Premium\npriority: 1\ndata:\n'
            '  - {model: a, slo-ttft: 400, slo-tpot: 40}\n'
            '  - {model: b, slo-ttft: 400, slo-tpot: 40}'
        },
    )
    predictive = source(
        {
            'default': 'targetTTFT: 2000\ntargetITL: 100',
            'b': 'model_id: b\ntargetTTFT: 900\ntargetITL: 90',
        }
    )
    config, errors = build(classes, predictive)
    assert errors == []

    def targets(model: str) -> tuple[float | None, float | None, str | None]:
        got = config.model(model_id=model, namespace='ns').predictive
        assert got is not None
        return got.slo.target_ttft, got.slo.target_itl, got.slo.service_class

    assert targets('a') == (400.0, 40.0, 'Premium')
    assert targets('b') == (900.0, 90.0, None)
    assert targets('c') == (2000.0, 100.0, None)


def test_the_queueing_map_neither_feeds_nor_hides_the_predictive_one() -> None:
    queueing = ConfigMapSource(
        name=QUEUEING_CONFIGMAP,
        namespace=CTRL,
        data={'default': 'sloMultiplier: 7\ntargetTTFT: 800\ntargetITL: 80'},
    )
    config, errors = build(queueing, source({'default': 'startupSeconds: 30'}))
    assert errors == []
    model = config.model(model_id='m', namespace='ns')
    assert model.queueing == QueueingModelConfig(
        slo_multiplier=7.0, target_ttft=800.0, target_itl=80.0
    )
    # Both apply; the engine gives the predictive analyzer precedence (types.ModelConfig).
    assert model.predictive == PredictiveConfig(startup_seconds=30.0)


def test_namespace_local_map_cannot_name_another_namespace() -> None:
    config, errors = build(
        source({'a': 'model_id: m\nnamespace: prod\nstartupSeconds: 5'}, namespace='team')
    )
    assert errors == [
        f"team/{PREDICTIVE_CONFIGMAP}: key 'a', field 'namespace' = 'prod': "
        "a namespace-local ConfigMap applies only to namespace 'team'"
    ]
    assert config.model(model_id='m', namespace='team').predictive == PredictiveConfig()


NAMESPACES = (CTRL, 'a', 'b')
STARTUPS = (10.0, 20.0, 30.0, 40.0)


@st.composite
def predictive_maps(draw: st.DrawFn) -> list[ConfigMapSource]:
    """Predictive maps in some of three namespaces; entries `default`, `m1` (every namespace)
    and `m1@a` (namespace a), each setting startupSeconds."""
    maps = []
    for namespace in NAMESPACES:
        if not draw(st.booleans()):
            continue
        data: dict[str, str] = {}
        for key in draw(st.lists(st.sampled_from(['default', 'm1', 'm1@a', 'm2']), unique=True)):
            model, _, ns = key.partition('@')
            head = '' if key == 'default' else f'model_id: {model}\n'
            head += f'namespace: {ns}\n' if ns else ''
            data[key] = f'{head}startupSeconds: {draw(st.sampled_from(STARTUPS))}'
        maps.append(source(data, namespace=namespace))
    return maps


def expected_startup(maps: list[ConfigMapSource], model: str, namespace: str) -> float | None:
    """Brute force: the five layers in order, the last startupSeconds that applies."""
    glob = [c for c in maps if c.namespace == CTRL]
    local = [c for c in maps if c.namespace == namespace and namespace != CTRL]
    if not glob and not local:
        return None

    def startup(c: ConfigMapSource, key: str) -> float | None:
        text = c.data.get(key)
        return None if text is None else float(text.rsplit(' ', 1)[1])

    layers = [startup(c, 'default') for c in glob] + [startup(c, 'default') for c in local]
    layers += [startup(c, model) for c in glob] + [startup(c, f'{model}@{namespace}') for c in glob]
    for c in local:  # one layer: with or without the namespace, the first key in sort order
        found = [v for v in (startup(c, model), startup(c, f'{model}@{namespace}')) if v]
        layers.append(found[0] if found else None)
    value = PredictiveConfig().startup_seconds
    for item in layers:
        if item is not None:
            value = item
    return value


@settings(max_examples=80, deadline=None)
@given(predictive_maps(), st.randoms(use_true_random=False))
def test_lookup_equals_the_brute_force_chain_whatever_the_order(
    maps: list[ConfigMapSource], rnd: random.Random
) -> None:
    config, errors = build(*maps)
    # In a namespace's own map, `m1@a` is refused outside namespace a and a duplicate of `m1`
    # in it; nothing else is wrong.
    assert all(
        'applies only to namespace' in error or "duplicate entry for model 'm1'" in error
        for error in errors
    ), errors
    shuffled = list(maps)
    rnd.shuffle(shuffled)
    assert build(*shuffled)[0] == config
    for model in ('m1', 'm2', 'x'):
        for namespace in (*NAMESPACES, 'c'):
            got = config.model(model_id=model, namespace=namespace).predictive
            want = expected_startup(maps, model, namespace)
            assert (got.startup_seconds if got is not None else None) == want, (model, namespace)


# --- live reload and the config file ------------------------------------------------------------


def obj(data: dict[str, str], namespace: str = CTRL) -> dict[str, object]:
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {'name': PREDICTIVE_CONFIGMAP, 'namespace': namespace},
        'data': data,
    }


def test_a_bad_edit_is_reported_and_the_last_good_copy_stays() -> None:
    assert PREDICTIVE_CONFIGMAP in SCALING_CONFIGMAPS
    watch = ConfigWatch(settings=SETTINGS, controller_namespace=CTRL)
    good = watch.update(configmaps=[obj({'default': 'startupSeconds: 60'})])
    assert (good.changed, good.problems) == (True, ())
    expected = PredictiveConfig(startup_seconds=60.0)
    assert good.config.model(model_id='m', namespace='ns').predictive == expected

    bad = watch.update(
        configmaps=[
            obj(
                {'default': 'startupSeconds: 90', 'llama': 'model_id: llama\nforecastQuantile: 1.5'}
            )
        ]
    )
    assert bad.changed is False
    assert bad.kept == (f'{CTRL}/{PREDICTIVE_CONFIGMAP}',)
    (problem,) = bad.problems
    assert (problem.namespace, problem.name) == (CTRL, PREDICTIVE_CONFIGMAP)
    assert problem.message == (
        "key 'llama', field 'forecastQuantile' = '1.5': must be in (0.5, 1) (model 'llama')"
    )
    # Neither the bad entry nor its valid neighbour (90) leaks through.
    assert bad.config.model(model_id='llama', namespace='ns').predictive == expected

    fixed = watch.update(configmaps=[obj({'default': 'startupSeconds: 90'})])
    assert (fixed.changed, fixed.problems, fixed.kept) == (True, (), ())
    assert fixed.config.model(model_id='m', namespace='ns').predictive == PredictiveConfig(
        startup_seconds=90.0
    )
    gone = watch.update(configmaps=[])
    assert gone.config.model(model_id='m', namespace='ns').predictive is None


VALID = 'startupSeconds: 60\nforecastQuantile: 0.9\ntargetTTFT: 900\ntargetITL: 60'
PIECES = ['.nan', '-.inf', '1e999', '"7x"', '!!int "x"', '&a', '*a', '[', '{', ':', '- ', '0']
PIECES += ['2001-13-45', '~', 'yes', '"2m"', '-1', '1.5', '\n  x: 1', '\nbogus: 1', '9' * 80]


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.text(max_size=120),
        st.builds(
            lambda at, piece: (
                VALID[: at % (len(VALID) + 1)] + piece + VALID[at % (len(VALID) + 1) :]
            ),
            st.integers(0, 200),
            st.sampled_from(PIECES) | st.text(max_size=8),
        ),
    ),
    st.booleans(),
)
def test_a_mutated_map_never_raises_nor_replaces_the_last_good_copy(text: str, local: bool) -> None:
    namespace = 'team' if local else CTRL
    watch = ConfigWatch(settings=SETTINGS, controller_namespace=CTRL)
    before = watch.update(configmaps=[obj({'default': VALID}, namespace)]).config
    update = watch.update(configmaps=[obj({'default': text}, namespace)])
    if update.problems:
        (problem,) = update.problems
        assert (problem.namespace, problem.name) == (namespace, PREDICTIVE_CONFIGMAP)
        assert '\n' not in problem.message
        assert update.config == before
    else:
        assert update.config == build(source({'default': text}, namespace=namespace))[0]


def test_config_file_reads_the_map(tmp_path: Path) -> None:
    path = tmp_path / 'config.yaml'
    path.write_text(
        'configMaps:\n'
        f'  - metadata: {{name: {PREDICTIVE_CONFIGMAP}, namespace: team}}\n'
        '    data:\n'
        '      default: "startupSeconds: 3m"\n'
        f'  - metadata: {{name: {PREDICTIVE_CONFIGMAP}}}\n'
        '    data:\n'
        '      bad: "model_id: m\\nlatencyMargin: 0"\n',
        encoding='utf-8',
    )
    config, errors = load_config_file(path=str(path), env={})
    assert [str(e) for e in errors] == [
        'workload-variant-autoscaler-system/llmscaler-predictive-config: key '
        "'bad', field 'latencyMargin' = '0': must be in (0, 1] (model 'm')"
    ]
    assert config.model(model_id='m', namespace='team').predictive == PredictiveConfig(
        startup_seconds=180.0
    )
    assert config.model(model_id='m', namespace='prod').predictive == PredictiveConfig()


def test_the_error_line_in_the_docs_is_the_parsers() -> None:
    docs = (ROOT / 'docs' / 'configuration.md').read_text(encoding='utf-8')
    entry = 'model_id: "meta/llama-3.1-8b"\nnamespace: "llm-inference"\nforecastQuantile: 1.5'
    _, errors = parse_predictive_configmap(
        source=ConfigMapSource(
            name=PREDICTIVE_CONFIGMAP,
            namespace='workload-variant-autoscaler-system',
            data={'llama-predictive': entry},
        )
    )
    assert f'\n{only_error(errors)}\n' in docs
