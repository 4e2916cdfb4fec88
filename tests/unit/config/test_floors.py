"""`capacityFloors` in the saturation ConfigMap: parsed strictly, layered, reloaded live.

Worked example: the entry below holds one floor, from 08:00 Europe/Berlin on weekdays for 10 h, of
6 replicas of `llama-h100`; 2026-03-02 (a Monday) 08:30 CET is 07:30 UTC.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import SATURATION_CONFIGMAP, parse_saturation_configmap
from llmscaler.config.errors import ConfigError
from llmscaler.config.floors import MAX_FLOORS, capacity_floor_list
from llmscaler.config.resolved import Config, CoreSettings
from llmscaler.controller.cluster.configwatch import ConfigWatch
from llmscaler.enforce.capacity_floors import active

CTRL = 'llmscaler-system'
MODEL = 'meta/llama-3.1-8b'
FLOOR = """\
model_id: meta/llama-3.1-8b
namespace: llm
capacityFloors:
  - name: weekday-morning
    schedule: "0 8 * * 1-5"
    timeZone: Europe/Berlin
    duration: 10h
    capacity: {variant: llama-h100, replicas: 6}
"""
MONDAY_0830_BERLIN = dt.datetime(2026, 3, 2, 7, 30, tzinfo=dt.UTC).timestamp()


def source(data: dict[str, str], namespace: str = CTRL) -> ConfigMapSource:
    return ConfigMapSource(name=SATURATION_CONFIGMAP, namespace=namespace, data=data)


def build(*maps: ConfigMapSource) -> tuple[Config, tuple[ConfigError, ...]]:
    return build_config(configmaps=maps, settings=CoreSettings(), controller_namespace=CTRL)


def test_a_floor_is_read_into_the_models_configuration() -> None:
    config, errors = build(source({'llama': FLOOR, 'default': 'kvCacheThreshold: 0.7'}))
    assert errors == ()
    model = config.model(model_id=MODEL, namespace='llm')
    [floor] = model.capacity_floors
    assert (floor.name, floor.reference, floor.replicas) == ('weekday-morning', 'llama-h100', 6)
    assert floor.duration == 36000.0
    assert (floor.schedule.expression, floor.schedule.time_zone) == ('0 8 * * 1-5', 'Europe/Berlin')
    assert model.saturation.kv_cache_threshold == 0.7  # the other fields still merge
    assert active(model.capacity_floors, now=MONDAY_0830_BERLIN) == (floor,)
    assert active(model.capacity_floors, now=MONDAY_0830_BERLIN - 3600) == ()  # 07:30 Berlin
    # Other models and namespaces have none.
    assert config.model(model_id=MODEL, namespace='other').capacity_floors == ()
    assert config.model(model_id='other', namespace='llm').capacity_floors == ()


def test_defaults_name_by_position_and_zone_utc() -> None:
    floors = capacity_floor_list(
        [
            {'schedule': '@daily', 'duration': '90m', 'capacity': {'variant': 'a', 'replicas': 1}},
            {
                'schedule': '0 6 * * *',
                'duration': '1h',
                'capacity': {'variant': 'b', 'replicas': 2},
            },
        ]
    )
    assert [(f.name, f.schedule.time_zone, f.duration) for f in floors] == [
        ('floor-0', 'Etc/UTC', 5400.0),
        ('floor-1', 'Etc/UTC', 3600.0),
    ]


GOOD: dict[str, Any] = {
    'schedule': '0 8 * * 1-5',
    'duration': '10h',
    'capacity': {'variant': 'v', 'replicas': 2},
}


@pytest.mark.parametrize(
    ('value', 'field', 'words'),
    [
        ({'a': 1}, 'capacityFloors', 'must be a list of floors'),
        ([GOOD] * (MAX_FLOORS + 1), 'capacityFloors', 'more than 100'),
        (['0 8 * * *'], 'capacityFloors[0]', 'must be a mapping'),
        ([{**GOOD, 'replica': 2}], 'capacityFloors[0].replica', 'unknown field'),
        ([{k: v for k, v in GOOD.items() if k != 'duration'}], '[0].duration', 'is required'),
        ([{**GOOD, 'schedule': '0 8 * *'}], '[0].schedule', 'expected 5 fields'),
        ([{**GOOD, 'schedule': 8}], '[0].schedule', 'must be a cron expression'),
        ([{**GOOD, 'timeZone': 'Mars/Olympus'}], '[0].timeZone', 'not an IANA time zone'),
        ([{**GOOD, 'duration': '10'}], '[0].duration', 'has no unit'),
        ([{**GOOD, 'duration': 3600}], '[0].duration', 'Go duration string'),
        ([{**GOOD, 'duration': '0s'}], '[0].duration', 'positive duration'),
        ([{**GOOD, 'duration': '745h'}], '[0].duration', 'at most 744h'),
        ([{**GOOD, 'capacity': 6}], '[0].capacity', 'must be a mapping'),
        ([{**GOOD, 'capacity': {'variant': 'v'}}], '[0].capacity.replicas', 'is required'),
        ([{**GOOD, 'capacity': {'variant': '', 'replicas': 1}}], '.capacity.variant', 'non-empty'),
        ([{**GOOD, 'capacity': {'variant': 'v', 'replicas': 0}}], '.replicas', 'must be in [1'),
        ([{**GOOD, 'capacity': {'variant': 'v', 'replicas': 1.5}}], '.replicas', 'whole number'),
        ([{**GOOD, 'capacity': {'variant': 'v', 'replicas': True}}], '.replicas', 'whole number'),
        ([{**GOOD, 'capacity': {'variant': 'v', 'replicas': 1, 'gpu': 'H100'}}], '.gpu', 'unknown'),
        ([{**GOOD, 'name': 'x'}, {**GOOD, 'name': 'x'}], '[1].name', 'repeats a floor name'),
    ],
)
def test_a_malformed_floor_rejects_its_entry_with_one_line(
    value: object, field: str, words: str
) -> None:
    text = json.dumps({'model_id': MODEL, 'capacityFloors': value})  # JSON is YAML, no anchors
    entries, errors = parse_saturation_configmap(source=source({'llama': text, 'default': ''}))
    assert [e.key for e in entries] == ['default']  # the rest of the map still loads
    [error] = errors
    line = str(error)
    assert '\n' not in line
    assert field in error.field, line
    assert words in error.message, line
    assert error.key == 'llama'


def test_floors_are_refused_in_default_entries() -> None:
    text = 'capacityFloors: []'
    for namespace in (CTRL, 'llm'):
        _, errors = build(source({'default': text}, namespace))
        [error] = errors
        assert (error.key, error.field) == ('default', 'capacityFloors')
        assert 'only in per-model entries' in error.message


def test_the_most_specific_entry_wins_whole_and_an_empty_list_clears() -> None:
    other = FLOOR.replace('namespace: llm\n', '').replace('replicas: 6', 'replicas: 2')
    global_map = source({'any-ns': other, 'llm-ns': FLOOR})
    config, errors = build(global_map)
    assert errors == ()
    assert config.model(model_id=MODEL, namespace='llm').capacity_floors[0].replicas == 6
    assert config.model(model_id=MODEL, namespace='x').capacity_floors[0].replicas == 2
    local = source({'mine': f'model_id: {MODEL}\ncapacityFloors: []'}, 'llm')
    config, errors = build(global_map, local)
    assert errors == ()
    assert config.model(model_id=MODEL, namespace='llm').capacity_floors == ()
    assert config.model(model_id=MODEL, namespace='x').capacity_floors[0].replicas == 2


def configmap(data: dict[str, str]) -> dict[str, Any]:
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {'name': SATURATION_CONFIGMAP, 'namespace': CTRL, 'resourceVersion': '1'},
        'data': data,
    }


def test_a_malformed_floor_keeps_the_last_good_configmap() -> None:
    watch = ConfigWatch(settings=CoreSettings(), controller_namespace=CTRL, base=())
    good = watch.update(configmaps=[configmap({'llama': FLOOR})])
    assert good.problems == ()
    floors = good.config.model(model_id=MODEL, namespace='llm').capacity_floors
    assert [f.replicas for f in floors] == [6]

    broken = FLOOR.replace('Europe/Berlin', 'Europe/Atlantis').replace('replicas: 6', 'replicas: 9')
    bad = watch.update(configmaps=[configmap({'llama': broken})])
    assert bad.changed is False
    assert bad.kept == (f'{CTRL}/{SATURATION_CONFIGMAP}',)
    [problem] = bad.problems
    assert "'Europe/Atlantis' is not an IANA time zone name" in problem.message
    assert '\n' not in problem.message
    assert bad.config.model(model_id=MODEL, namespace='llm').capacity_floors == floors

    fixed = watch.update(
        configmaps=[configmap({'llama': FLOOR.replace('replicas: 6', 'replicas: 9')})]
    )
    assert fixed.changed is True
    assert [
        f.replicas for f in fixed.config.model(model_id=MODEL, namespace='llm').capacity_floors
    ] == [9]
