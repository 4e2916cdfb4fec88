"""Parses of cached objects, remembered from one `World` build to the next.

Why: a `World` is rebuilt whenever any VA, scale target or pod changes, and on a real cluster
something changes almost every cycle (kube-controller-manager writes Deployment statuses, the
controller writes VA statuses). Reading a thousand scale targets (their pod templates copied,
their engine arguments parsed) and parsing a thousand VAs took most of such a cycle's CPU, while
one or two of the objects had changed. An object the API server has not changed keeps its
`metadata.uid` and `metadata.resourceVersion`, so its parse is the same: it is looked up instead
of recomputed.

What is remembered: the result of a parse function per (what, namespace, name, uid,
resourceVersion), for the objects of the latest build only (an entry a build did not ask for is
dropped when the next build starts), so the memory held is one build's parses. An object without
a resourceVersion (a test's dict, an object not from an API server) is parsed every time. The
parse functions must be pure; their results are shared between builds and must not be mutated.

What fails: nothing; a parse function's exception propagates, and nothing is remembered for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

_T = TypeVar('_T')

_Key = tuple[str, str, str, str, str]


class ParsedObjects:
    """Parse results by object identity and resourceVersion (see the module docstring)."""

    def __init__(self) -> None:
        self._previous: dict[_Key, object] = {}
        self._current: dict[_Key, object] = {}

    def start(self) -> None:
        """A build begins: what the last build asked for is kept, everything older dropped."""
        self._previous, self._current = self._current, {}

    def parse(
        self,
        obj: Mapping[str, Any],
        parse: Callable[[Mapping[str, Any]], _T],
        *,
        what: str,
        namespace: str,
        name: str,
    ) -> _T:
        """`parse(obj)`, or the result remembered for this version of the object.

        `what` names the parse (two parses of one object are remembered apart); `namespace` and
        `name` are the object's key as its caller found it.
        """
        meta = obj.get('metadata') if isinstance(obj, Mapping) else None
        version = meta.get('resourceVersion') if isinstance(meta, Mapping) else None
        if not isinstance(version, str) or not version:
            return parse(obj)
        uid = meta.get('uid') if isinstance(meta, Mapping) else None
        key = (what, namespace, name, uid if isinstance(uid, str) else '', version)
        if key in self._current:
            return cast(_T, self._current[key])
        found = cast(_T, self._previous[key]) if key in self._previous else parse(obj)
        self._current[key] = found
        return found
