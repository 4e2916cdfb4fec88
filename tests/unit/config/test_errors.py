"""Error rendering is bounded for any value, and never shows what may be a secret.

`show_value` runs on the event loop that renews the leader Lease, over values a tenant wrote: a
value that is huge, deeply nested, self-containing or shared many times over (what YAML aliases
build) must cost a bounded amount of work and give a short line.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from llmscaler.config.errors import is_secret_key, show_setting, show_value
from llmscaler.config.settings import load_settings


class Leaf:
    """A value whose rendering is counted: the work done is the number of calls."""

    calls = 0

    def __repr__(self) -> str:
        Leaf.calls += 1
        return 'leaf'


def test_shared_structure_costs_bounded_work() -> None:
    # What `&a [*a, *a]` nested 20 times builds: 2**21 leaves reachable through shared lists.
    value: object = [Leaf(), Leaf()]
    for _ in range(20):
        value = [value, value]
    Leaf.calls = 0
    text = show_value(value)
    assert len(text) <= 80
    assert text.startswith('[[[[')
    assert Leaf.calls == 0  # rendered without asking the leaves at all


def test_huge_integer_deep_nesting_and_recursion_are_short_lines() -> None:
    deep: list[object] = []
    cursor = deep
    for _ in range(100_000):
        inner: list[object] = []
        cursor.append(inner)
        cursor = inner
    looped: list[object] = [1]
    looped.append(looped)
    assert show_value(10**5000) == '<very large integer>'
    assert show_value(deep) == '[' * 77 + '...'
    assert show_value(looped) == ('[1, ' * 20)[:77] + '...'
    assert show_value({'a': ['x' * 10_000]}) == "{'a': ['" + 'x' * 69 + '...'


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
        max_leaves=20,
    )
)
# A quote past the cut changes the quotes repr picks for the whole string.
@example({'': None, '\x1f': None, '\x1f\U00018d09': None, '0000\U00018d09': "00000000000000'"})
def test_plain_data_renders_as_repr_cut_at_80(value: object) -> None:
    expected = value if isinstance(value, str) else repr(value)
    expected = expected.replace('\r', '\\r').replace('\n', '\\n')
    if len(expected) > 80:
        expected = expected[:77] + '...'
    assert show_value(value) == expected


def test_secret_looking_keys() -> None:
    for key in (
        'PROMETHEUS_BEARER_TOKEN',
        'BEARER_TOKN',
        'db_password',
        'clientSecret',
        'API_KEY',
        'Auth',
    ):
        assert is_secret_key(key), key
        assert show_setting(key, 'sk-live-123') == ''
    for other in ('GLOBAL_OPT_INTERVAL', 'kvCacheThreshold', 3):
        assert not is_secret_key(other), other
    assert show_setting('GLOBAL_OPT_INTERVAL', '15') == '15'


def test_unknown_and_secret_settings_never_show_their_value() -> None:
    _, errors = load_settings(
        cli={'PROMETHEUS_BEARER_TOKN': 'sk-live-1'},
        env={},
        file={'prometheus_password': 'sk-live-2', 'NOPE': 'not-a-secret-either'},
        configmap={'EXTRA_CREDENTIALS': 'sk-live-3'},
    )
    lines = [str(error) for error in errors]
    assert lines == [
        "command line: key 'PROMETHEUS_BEARER_TOKN': unknown setting",
        "config file: key 'NOPE': unknown setting",
        "config file: key 'prometheus_password': unknown setting",
        "wva-manager-config: key 'EXTRA_CREDENTIALS': unknown setting",
    ]


def test_known_settings_still_show_the_bad_value() -> None:
    _, errors = load_settings(cli={}, env={}, file={'LLMSCALER_K2_WINDOW': 'many'}, configmap={})
    assert [str(error) for error in errors] == [
        "config file: key 'LLMSCALER_K2_WINDOW', value 'many': must be a whole number"
    ]
