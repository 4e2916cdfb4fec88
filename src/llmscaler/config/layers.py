"""The entries of one kind of scaling ConfigMap, split by the layer they belong to.

Why: every scaling ConfigMap layers the same way (as in llm-d workload-variant-autoscaler
v0.9.0, internal/config/), least to most specific:

    global `default` < namespace-local `default` < global per-model entry without namespace
        < global per-model entry for the namespace < namespace-local per-model entry

Global ConfigMaps are those in the controller namespace; one in any other namespace applies only
to models of that namespace. `split_layers` files one ConfigMap's accepted entries, `merge`
joins the ConfigMaps of a kind, and `chain` lists, for one model, the entries that apply to it
in that order; `config.build` merges their fields.

What fails: nothing raises. A namespace-local entry that names another namespace, a second
namespace-local entry for the same model, and `limiters` outside the global `default` entry are
refused with a `ConfigError` each; the other entries are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from llmscaler.config.configmap_entries import ConfigMapSource, Entry
from llmscaler.config.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_O = TypeVar('_O', bound='DataclassInstance')


@dataclass(frozen=True, slots=True)
class Layers:
    """The accepted entries of one ConfigMap kind, split by layer."""

    global_default: tuple[Entry[Any], ...] = ()
    local_default: tuple[tuple[str, Entry[Any]], ...] = ()
    global_models: tuple[Entry[Any], ...] = ()
    local_models: tuple[tuple[str, Entry[Any]], ...] = ()
    anywhere: bool = False
    """A ConfigMap of this kind is in the controller namespace (it applies everywhere)."""
    namespaces: frozenset[str] = frozenset()
    """Namespaces with a namespace-local ConfigMap of this kind."""

    def applies(self, *, namespace: str | None) -> bool:
        """Whether a ConfigMap of this kind applies to a model of `namespace`."""
        return self.anywhere or namespace in self.namespaces

    def chain(self, *, model_id: str | None, namespace: str | None) -> list[Entry[Any]]:
        """The entries that apply to (model_id, namespace), least specific first."""
        chain = list(self.global_default)
        if namespace is not None:
            chain += [entry for ns, entry in self.local_default if ns == namespace]
        if model_id is None:
            return chain
        chain += [e for e in self.global_models if e.model_id == model_id and e.namespace is None]
        if namespace is None:
            return chain
        chain += [
            e for e in self.global_models if e.model_id == model_id and e.namespace == namespace
        ]
        chain += [e for ns, e in self.local_models if ns == namespace and e.model_id == model_id]
        return chain

    def merge(self, other: Layers) -> Layers:
        """Both ConfigMaps' layers (this one's entries first in each layer)."""
        return Layers(
            global_default=self.global_default + other.global_default,
            local_default=self.local_default + other.local_default,
            global_models=self.global_models + other.global_models,
            local_models=self.local_models + other.local_models,
            anywhere=self.anywhere or other.anywhere,
            namespaces=self.namespaces | other.namespaces,
        )


def split_layers(
    *, entries: Sequence[Entry[_O]], source: ConfigMapSource, is_global: bool
) -> tuple[Layers, list[ConfigError]]:
    """The accepted entries of one ConfigMap by layer, and the entries refused here."""
    errors: list[ConfigError] = []
    layers = Layers()
    for entry in entries:
        if not is_global and getattr(entry.values, 'limiters', None) is not None:
            # GPU limits are the cluster's: a tenant's own ConfigMap must not lift its quota.
            message = 'limiters are read only from the global default entry; entry rejected'
            errors.append(
                ConfigError(source=source.source, key=entry.key, field='limiters', message=message)
            )
            continue
        if entry.model_id is None:
            if is_global:
                layers = replace(layers, global_default=(*layers.global_default, entry))
            else:
                pair = (source.namespace, entry)
                layers = replace(layers, local_default=(*layers.local_default, pair))
        elif is_global:
            layers = replace(layers, global_models=(*layers.global_models, entry))
        elif entry.namespace not in (None, source.namespace):
            message = f'a namespace-local ConfigMap applies only to namespace {source.namespace!r}'
            errors.append(
                ConfigError(
                    source=source.source,
                    key=entry.key,
                    field='namespace',
                    value=str(entry.namespace),
                    message=message,
                )
            )
        elif any(e.model_id == entry.model_id for _, e in layers.local_models):
            first = next(e.key for _, e in layers.local_models if e.model_id == entry.model_id)
            message = (
                f'duplicate entry for model {entry.model_id!r} in namespace '
                f'{source.namespace!r}; key {first!r} (first in sort order) is used'
            )
            errors.append(ConfigError(source=source.source, key=entry.key, message=message))
        else:
            local = replace(entry, namespace=source.namespace)
            pair = (source.namespace, local)
            layers = replace(layers, local_models=(*layers.local_models, pair))
    where = frozenset() if is_global else frozenset({source.namespace})
    return replace(layers, anywhere=is_global, namespaces=where), errors
