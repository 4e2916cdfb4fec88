"""What a simulated run is given, checked, and its traces merged into one stream of arrivals.

Why: the event loop (`sim.run.loop`) must trust its inputs, as the controller trusts what the
cluster tells it; the checks of the fleet and of the traces, and the merge of several models'
traces into one arrival stream in time order, are kept here, apart from the loop that plays the
events.

What it holds: `check_variants` (the fleet the controller could manage: named uniquely, in one
namespace, model names and model ids one to one), `traces_by_model` (a trace per served model,
in name order), `check_trace` (`Trace`'s promise: finite, non-negative, non-decreasing arrivals)
and `merged_arrivals`, every arrival of every trace in time order (ties: model name order as
given, then trace order) with its prompt block ids when a trace has them.

What fails: the checks raise `ValueError` for no variants, duplicate variant names, variants in
several namespaces, a model whose variants name different model ids or two models with one model
id (the controller groups variants by model id), one trace for variants of several models, a
trace for a model no variant serves or no trace for a model, and arrivals that are not finite,
non-negative and non-decreasing. `merged_arrivals` does not check: it is given checked traces.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from llmscaler.sim.vocabulary import Trace, VariantSpec

_CHUNK = 4096  # arrivals converted from numpy at a time
_BLOCK = 512  # the block size of absent prompt block ids (never read)


def check_variants(*, variants: Sequence[VariantSpec]) -> None:
    """Raise `ValueError` unless the variants are non-empty, uniquely named, in one namespace,
    and their models (`VariantSpec.model_name`) and model ids correspond one to one."""
    if not variants:
        raise ValueError('no variants to simulate')
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f'duplicate variant names: {sorted(names)}')
    namespaces = sorted({v.namespace for v in variants})
    if len(namespaces) > 1:
        raise ValueError(f'all variants must be in one namespace, got {", ".join(namespaces)}')
    ids: dict[str, set[str]] = {}
    models: dict[str, set[str]] = {}
    for spec in variants:
        ids.setdefault(spec.model_name, set()).add(spec.model_id)
        models.setdefault(spec.model_id, set()).add(spec.model_name)
    for model in sorted(ids):
        if len(ids[model]) > 1:
            raise ValueError(
                f'model {model}: its variants name several model ids: {sorted(ids[model])}'
            )
    for model_id in sorted(models):
        if len(models[model_id]) > 1:
            raise ValueError(
                f'models {" and ".join(sorted(models[model_id]))} both have model id '
                f'{model_id}: the controller would take them for one model'
            )


def traces_by_model(
    *, trace: Trace | Mapping[str, Trace], variants: Sequence[VariantSpec]
) -> list[tuple[str, Trace]]:
    """The traces by model name, in name order, checked against the variants' models."""
    served = sorted({v.model_name for v in variants})
    if isinstance(trace, Trace):
        if len(served) > 1:
            raise ValueError(
                f'one trace serves one model; the variants serve {len(served)} '
                f'({", ".join(served)}): give a trace per model'
            )
        return [(served[0], trace)]
    unknown = sorted(set(trace) - set(served))
    if unknown:
        raise ValueError(
            f'a trace for model {unknown[0]!r}, which no variant serves; models: '
            + ', '.join(served)
        )
    missing = [m for m in served if m not in trace]
    if missing:
        raise ValueError(f'no trace for model {missing[0]!r}')
    return [(m, trace[m]) for m in served]


def check_trace(*, trace: Trace) -> None:
    """Raise `ValueError` unless the arrivals are finite, >= 0 and in order (`Trace`'s promise)."""
    arrivals = trace.arrivals
    if not len(trace):
        return
    if not bool(np.all(np.isfinite(arrivals))) or float(arrivals[0]) < 0:
        raise ValueError(f'trace {trace.name!r}: arrivals must be finite and >= 0')
    if bool(np.any(np.diff(arrivals) < 0)):
        raise ValueError(f'trace {trace.name!r}: arrivals must be non-decreasing')


Arrival = tuple[float, int, int, str, Sequence[int] | None, int]


Prefix = Sequence[int] | None


def _prefixes(traces: Sequence[tuple[str, Trace]]) -> tuple[list[Prefix], list[int]] | None:
    """Every arrival's prompt block ids and their block size, trace after trace (None when no
    trace has ids)."""
    if all(t.prefixes is None for _, t in traces):
        return None
    ids: list[Prefix] = []
    sizes: list[int] = []
    for _, t in traces:
        ids += [None] * len(t) if t.prefixes is None else t.prefixes.tolist()
        sizes += [t.prefix_block] * len(t)
    return ids, sizes


def merged_arrivals(traces: Sequence[tuple[str, Trace]]) -> Iterator[Arrival]:
    """(time, input, output, model, prompt block ids, their block size) of every arrival of
    every trace, in time order (ties: model name order as given, then trace order)."""
    known = _prefixes(traces)
    ids: list[Prefix] | None = None if known is None else known[0]
    sizes: list[int] | None = None if known is None else known[1]
    if len(traces) == 1:
        model, trace = traces[0]
        arrivals, inputs, outputs = trace.arrivals, trace.input_tokens, trace.output_tokens
        labels: list[str] | None = None
    else:
        arrivals = np.concatenate([t.arrivals for _, t in traces])
        order = np.argsort(arrivals, kind='stable')
        arrivals = arrivals[order]
        inputs = np.concatenate([t.input_tokens for _, t in traces])[order]
        outputs = np.concatenate([t.output_tokens for _, t in traces])[order]
        index = np.repeat(np.arange(len(traces)), [len(t) for _, t in traces])[order]
        names = [m for m, _ in traces]
        labels = [names[i] for i in index.tolist()]
        model = ''
        if ids is not None and sizes is not None:
            picked = order.tolist()
            ids = [ids[i] for i in picked]
            sizes = [sizes[i] for i in picked]
    # Chunks keep the per-item cost of Python floats without materialising a huge list at once.
    for start in range(0, arrivals.shape[0], _CHUNK):
        stop = start + _CHUNK
        times = arrivals[start:stop].tolist()
        yield from zip(
            times,
            inputs[start:stop].tolist(),
            outputs[start:stop].tolist(),
            labels[start:stop] if labels is not None else [model] * len(times),
            [None] * len(times) if ids is None else ids[start:stop],
            [_BLOCK] * len(times) if sizes is None else sizes[start:stop],
            strict=True,
        )
