"""Server-side printing for the fake kube-apiserver: meta.k8s.io/v1 Tables of custom resources.

Why: `kubectl get` asks the apiserver for a Table (Accept
`application/json;as=Table;v=v1;g=meta.k8s.io`) and prints its columns; for a custom resource
those are the CRD's `additionalPrinterColumns`. Answering Tables lets a test check the printer
columns of the CRD we ship (deploy/base/crds) through kubectl itself, the way a user sees them.

What it computes, as the apiextensions-apiserver's table convertor does: a `Name` column (format
`name`), then one column per printer column (name, type, format, description, priority). A cell
is the first result of the column's JSONPath: `string` columns print it as text, `integer` /
`number` / `boolean` columns keep a value of that JSON type, `date` columns show the age of an
RFC 3339 timestamp (`HumanDuration`: 42s, 5m10s, 3h, 2d4h, ...) and `<invalid>` for another
string; anything else, and a path that finds nothing, is null (kubectl leaves the cell empty).
Rows carry the object as `PartialObjectMetadata` (query `includeObject=Metadata`, the default),
the whole object (`Object`) or nothing (`None`).

Scope: list and single-object GETs of resources whose CRD is in deploy/base/crds; every other
request (built-in kinds, custom resources without a CRD file here, watches, subresources, a
client that does not ask for a Table) gets the plain object, which kubectl also prints, with
its own default columns. JSONPath: the subset printer columns use, `.field`, `[N]`, `[*]` and
filters `[?(@.a.b=="x")]` with `==`/`!=` against a quoted string or a number; a CRD that uses
more fails loudly (ValueError) when the CRDs are loaded.

Where: the CRDs are read from deploy/base/crds of the source checkout this package sits in (the
single source kustomize also applies); `require_crds` raises FileNotFoundError naming that
directory when it holds no CRD, e.g. when the package is installed without its checkout.
"""

from __future__ import annotations

import datetime
import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from llmscaler.devcluster.fakeapi.resources import Resource

Obj = dict[str, Any]

# src/llmscaler/devcluster/fakeapi/table.py -> the checkout's root.
CRD_DIR = Path(__file__).resolve().parents[4] / 'deploy' / 'base' / 'crds'
NAME_DESCRIPTION = (
    'Name must be unique within a namespace. Is required when creating resources, although some '
    'resources may allow a client to request the generation of an appropriate name '
    'automatically. Name is primarily intended for creation idempotence and configuration '
    'definition. Cannot be updated. More info: '
    'https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names'
)

_TOKEN = re.compile(
    r'\.(?P<field>[A-Za-z0-9_-]+)'
    r'|\[(?P<index>-?\d+)\]'
    r'|\[(?P<all>\*)\]'
    r'|\[\?\(@(?P<fpath>(?:\.[A-Za-z0-9_-]+)+)\s*(?P<op>==|!=)\s*'
    r'(?P<literal>"[^"]*"|\'[^\']*\'|-?\d+(?:\.\d+)?)\)\]'
)


@dataclass(frozen=True, slots=True)
class _Step:
    kind: str  # 'field', 'index', 'all' or 'filter'
    field: str = ''
    index: int = 0
    path: tuple[str, ...] = ()
    equal: bool = True
    literal: object = None


@dataclass(frozen=True, slots=True)
class JsonPath:
    """A compiled printer-column JSONPath (the subset described in the module docstring)."""

    text: str
    steps: tuple[_Step, ...]

    def find(self, obj: object) -> list[object]:
        """Every value the path reaches in `obj`, in document order."""
        values = [obj]
        for step in self.steps:
            values = [found for value in values for found in _apply(step, value)]
        return values


def compile_jsonpath(*, text: str) -> JsonPath:
    """Compile a printer-column JSONPath; raises ValueError for what the subset lacks."""
    body = text.strip()
    if body.startswith('{') and body.endswith('}'):
        body = body[1:-1]
    steps: list[_Step] = []
    at = 0
    while at < len(body):
        match = _TOKEN.match(body, at)
        if match is None:
            raise ValueError(f'unsupported JSONPath {text!r} at offset {at}')
        at = match.end()
        if match['field'] is not None:
            steps.append(_Step('field', field=match['field']))
        elif match['index'] is not None:
            steps.append(_Step('index', index=int(match['index'])))
        elif match['all'] is not None:
            steps.append(_Step('all'))
        else:
            raw = match['literal']
            literal: object = raw[1:-1] if raw[0] in '"\'' else float(raw)
            path = tuple(match['fpath'].split('.')[1:])
            steps.append(_Step('filter', path=path, equal=match['op'] == '==', literal=literal))
    if not steps:
        raise ValueError(f'empty JSONPath {text!r}')
    return JsonPath(text, tuple(steps))


def _dig(value: object, path: Sequence[str]) -> tuple[bool, object]:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


def _same(value: object, literal: object) -> bool:
    if isinstance(literal, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return float(value) == literal
    return value == literal


def _apply(step: _Step, value: object) -> list[object]:
    if step.kind == 'field':
        return [value[step.field]] if isinstance(value, dict) and step.field in value else []
    if step.kind == 'index':
        if isinstance(value, list) and -len(value) <= step.index < len(value):
            return [value[step.index]]
        return []
    items = (
        value
        if isinstance(value, list)
        else list(value.values())
        if isinstance(value, dict)
        else []
    )
    if step.kind == 'all':
        return list(items)
    kept = []
    for item in items:
        found, inner = _dig(item, step.path)
        if found and _same(inner, step.literal) == step.equal:
            kept.append(item)
    return kept


@dataclass(frozen=True, slots=True)
class Column:
    """One `additionalPrinterColumns` entry of a CRD version."""

    name: str
    type: str
    path: JsonPath
    format: str = ''
    description: str = ''
    priority: int = 0


def _column(raw: Mapping[str, Any]) -> Column:
    return Column(
        name=str(raw['name']),
        type=str(raw['type']),
        path=compile_jsonpath(text=str(raw['jsonPath'])),
        format=str(raw.get('format', '')),
        description=str(raw.get('description', '')),
        priority=int(raw.get('priority', 0)),
    )


@functools.cache
def _crd_columns(crd_dir: Path) -> dict[tuple[str, str, str], tuple[Column, ...]]:
    columns: dict[tuple[str, str, str], tuple[Column, ...]] = {}
    for path in sorted(crd_dir.glob('*.yaml')):
        for doc in yaml.safe_load_all(path.read_text(encoding='utf-8')):
            if not isinstance(doc, dict) or doc.get('kind') != 'CustomResourceDefinition':
                continue
            spec = doc['spec']
            for version in spec['versions']:
                raw = version.get('additionalPrinterColumns') or []
                key = (spec['group'], version['name'], spec['names']['plural'])
                columns[key] = tuple(_column(entry) for entry in raw)
    return columns


def require_crds(*, crd_dir: Path | None = None) -> None:
    """Load the CRDs of `crd_dir` (default CRD_DIR); FileNotFoundError when it holds none."""
    crd_dir = CRD_DIR if crd_dir is None else crd_dir
    if not _crd_columns(crd_dir):
        raise FileNotFoundError(
            f'no CustomResourceDefinition in {crd_dir}: the fake API serves the printer columns '
            'of deploy/base/crds and runs from a source checkout (pip install -e .)'
        )


def printer_columns(
    *, group: str, version: str, plural: str, crd_dir: Path | None = None
) -> tuple[Column, ...] | None:
    """The printer columns of a served custom resource, or None when no CRD here defines it."""
    return _crd_columns(CRD_DIR if crd_dir is None else crd_dir).get((group, version, plural))


def wants_table(*, accept: str) -> bool:
    """Whether an Accept header asks for a meta.k8s.io/v1 Table."""
    for media in accept.split(','):
        parts = [p.strip() for p in media.split(';')]
        params = dict(p.split('=', 1) for p in parts[1:] if '=' in p)
        if (
            parts[0] in ('application/json', '*/*')
            and params.get('as') == 'Table'
            and params.get('g') == 'meta.k8s.io'
            and params.get('v') == 'v1'
        ):
            return True
    return False


def human_duration(*, seconds: float) -> str:
    """apimachinery's `duration.HumanDuration`: the age column's text."""
    whole = int(seconds)
    if whole < -1:
        return '<invalid>'
    if whole < 0:
        return '0s'
    if whole < 120:
        return f'{whole}s'
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f'{minutes}m' if rest == 0 else f'{minutes}m{rest}s'
    if minutes < 180:
        return f'{minutes}m'
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f'{hours}h' if rest == 0 else f'{hours}h{rest}m'
    if hours < 48:
        return f'{hours}h'
    if hours < 24 * 8:
        rest = hours % 24
        return f'{hours // 24}d' if rest == 0 else f'{hours // 24}d{rest}h'
    if hours < 24 * 365 * 2:
        return f'{hours // 24}d'
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        years = hours // 24 // 365
        return f'{years}y' if rest == 0 else f'{years}y{rest}d'
    return f'{hours // 24 // 365}y'


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value, separators=(',', ':'))


def _age(value: str, now: datetime.datetime) -> str:
    try:
        stamp = datetime.datetime.fromisoformat(value.replace('Z', '+00:00'))
    except ValueError:
        return '<invalid>'
    if stamp.tzinfo is None:
        return '<invalid>'
    return human_duration(seconds=(now - stamp).total_seconds())


def cell(*, column: Column, obj: Obj, now: datetime.datetime) -> object:
    """One column's cell for one object (None: an empty cell)."""
    found = column.path.find(obj)
    if not found or found[0] is None:
        return None
    value = found[0]
    kind = column.type
    if kind == 'string':
        return _text(value)
    if kind == 'boolean' or isinstance(value, bool):
        return value if kind == 'boolean' and isinstance(value, bool) else None
    if kind == 'integer' and isinstance(value, int | float):
        return int(value)
    if kind == 'number' and isinstance(value, int | float):
        return float(value)
    if kind == 'date' and isinstance(value, str):
        return _age(value, now)
    return None


def _row_object(obj: Obj, include: str) -> Obj | None:
    if include == 'None':
        return None
    if include == 'Object':
        return obj
    return {
        'kind': 'PartialObjectMetadata',
        'apiVersion': 'meta.k8s.io/v1',
        'metadata': obj.get('metadata', {}),
    }


def to_table(
    *, body: Obj, columns: Sequence[Column], include_object: str, now: datetime.datetime
) -> Obj:
    """The Table of a list (`items`) or of one object."""
    is_list = isinstance(body.get('items'), list)
    objects: list[Obj] = body['items'] if is_list else [body]
    definitions: list[Obj] = [
        {
            'name': 'Name',
            'type': 'string',
            'format': 'name',
            'description': NAME_DESCRIPTION,
            'priority': 0,
        }
    ]
    definitions += [
        {
            'name': c.name,
            'type': c.type,
            'format': c.format,
            'description': c.description,
            'priority': c.priority,
        }
        for c in columns
    ]
    rows = []
    for obj in objects:
        cells = [obj.get('metadata', {}).get('name', '')]
        cells += [cell(column=c, obj=obj, now=now) for c in columns]
        row: Obj = {'cells': cells}
        included = _row_object(obj, include_object)
        if included is not None:
            row['object'] = included
        rows.append(row)
    meta = body.get('metadata', {})
    list_meta = {k: meta[k] for k in ('resourceVersion', 'continue') if k in meta}
    return {
        'kind': 'Table',
        'apiVersion': 'meta.k8s.io/v1',
        'metadata': list_meta,
        'columnDefinitions': definitions,
        'rows': rows,
    }


def negotiate(
    *,
    accept: str,
    query: Mapping[str, str],
    resource: Resource,
    body: Obj,
    now: datetime.datetime | None = None,
) -> Obj:
    """`body` as a Table when the client asked for one and the resource has a CRD here."""
    if not wants_table(accept=accept):
        return body
    columns = printer_columns(
        group=resource.group, version=resource.version, plural=resource.plural
    )
    if columns is None:
        return body
    moment = now if now is not None else datetime.datetime.now(datetime.UTC)
    include = query.get('includeObject', 'Metadata')
    return to_table(body=body, columns=columns, include_object=include, now=moment)
