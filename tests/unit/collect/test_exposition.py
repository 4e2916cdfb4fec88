"""Tests of the pre-filtering exposition parser, against the official parser where one applies."""

from __future__ import annotations

import math
import re
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from llmscaler.collect import exposition as ex
from llmscaler.collect.exposition import EPP_FAMILIES, VLLM_FAMILIES, Page, Sample, parse
from tests.support.paths import REFERENCE_PAGE
from tests.support.prerequisites import need_file

EXAMPLE = REFERENCE_PAGE
WANTED = VLLM_FAMILIES | EPP_FAMILIES
MODEL = 'meta-llama/Llama-3.1-8B-Instruct'

Key = tuple[str, tuple[tuple[str, str], ...]]


def example_page() -> bytes:
    return need_file(EXAMPLE).read_bytes()


def as_dict(page: Page) -> dict[Key, float]:
    return {(s.name, s.labels): s.value for s in page.samples}


def official(text: str, families: frozenset[str]) -> dict[Key, float]:
    """What prometheus_client's full parser reads, restricted to the same families."""
    found: dict[Key, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            owned = ex.family_of(name=sample.name, families=families) is not None
            if owned and math.isfinite(sample.value):
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


# --- the real page -----------------------------------------------------------------------------


def test_example_page_matches_the_official_parser() -> None:
    raw = example_page()
    page = parse(page=raw, families=WANTED)
    ours = as_dict(page)
    assert len(ours) == len(page.samples)  # no series twice
    assert ours == official(raw.decode(), WANTED)
    assert page.errors == ()
    assert page.dropped_non_finite == 0
    # 5 histograms (13 + 13 + 23 + 20 + 20 buckets, each + sum, count, created) = 104, 3 gauges,
    # cache_config_info, 2 counters × (total, created) = 4, request_success 3 × 2 = 6 → 118.
    assert len(page.samples) == 118


def test_example_page_worked_values() -> None:
    groups = ex.parse_families(page=example_page(), families=WANTED)
    kv = groups['vllm:kv_cache_usage_perc']
    assert kv == [
        Sample('vllm:kv_cache_usage_perc', (('engine', '0'), ('model_name', MODEL)), 0.1187)
    ]
    (info,) = groups['vllm:cache_config_info']
    assert (info.label('num_gpu_blocks'), info.label('block_size')) == ('27863', '16')
    assert info.label('absent') is None
    assert [s.name for s in groups['vllm:prefix_cache_hits']] == [
        'vllm:prefix_cache_hits_total',
        'vllm:prefix_cache_hits_created',
    ]
    ttft = groups['vllm:time_to_first_token_seconds']
    assert ttft[-4].labels[1] == ('le', '+Inf')  # le="+Inf" is a label, not a dropped value
    assert {s.label('finished_reason') for s in groups['vllm:request_success']} == {
        'stop',
        'length',
        'abort',
    }
    # Families of the older generation are keys too, empty on this (0.12-shaped) page.
    assert groups['vllm:gpu_cache_usage_perc'] == []
    assert groups['vllm:time_per_output_token_seconds'] == []
    assert list(groups) == sorted(WANTED)


def test_example_page_types() -> None:
    types = dict(parse(page=example_page(), families=WANTED).types)
    assert types['vllm:kv_cache_usage_perc'] == 'gauge'
    assert types['vllm:prefix_cache_queries_total'] == 'counter'
    assert types['vllm:request_prompt_tokens'] == 'histogram'
    assert types['vllm:request_prompt_tokens_created'] == 'gauge'
    assert 'vllm:e2e_request_latency_seconds' not in types


def test_the_family_sets_name_what_the_page_exposes() -> None:
    names = {s.name for s in parse(page=example_page(), families=WANTED).samples}
    for name in (
        'vllm:prefix_cache_hits_total',
        'vllm:prefix_cache_queries_total',
        'vllm:request_success_total',
        'vllm:request_prompt_tokens_sum',
        'vllm:request_generation_tokens_count',
        'vllm:inter_token_latency_seconds_bucket',
    ):
        assert name in names
    assert 'inference_extension_scheduler_attempts' in EPP_FAMILIES
    assert ex.family_of(
        name='inference_extension_scheduler_attempts_total', families=EPP_FAMILIES
    ) == ('inference_extension_scheduler_attempts')


def test_a_reused_parser_reads_each_page_afresh() -> None:
    raw = example_page()
    parser = ex.Parser(families=WANTED)
    cold = parser.parse(page=raw)
    # One `name{labels}` text per kept sample: no line of another family on this page starts
    # with the first 20 characters of a wanted one (the pre-filter's width).
    assert parser.remembered == 118
    warm = parser.parse(page=raw)
    assert warm == cold == parse(page=raw, families=WANTED)
    # The same series with other values (the next scrape) reads the new values.
    later = parser.parse(page=raw.replace(b'} 0.1187', b'} 0.5'))
    assert dict(as_dict(later))[
        ('vllm:kv_cache_usage_perc', (('engine', '0'), ('model_name', MODEL)))
    ] == (0.5)
    assert len(later.samples) == 118


def test_parsers_share_nothing() -> None:
    raw = example_page()
    first = ex.Parser(families=WANTED)
    first.parse(page=raw)
    parse(page=raw, families=WANTED)  # the convenience function builds a throwaway Parser
    second = ex.Parser(families=WANTED)
    assert first.remembered > 0
    assert second.remembered == 0
    assert second.families == WANTED


def test_the_memory_is_bounded_and_optional() -> None:
    raw = example_page()
    expected = parse(page=raw, families=WANTED)
    for size in (0, 1, 7):
        parser = ex.Parser(families=WANTED, cache_size=size)
        # Cleared whenever full: at most `size` texts, and the pages read the same throughout.
        assert parser.parse(page=raw) == expected
        assert parser.parse(page=raw) == expected
        assert parser.remembered <= size
    with pytest.raises(ValueError, match='cache_size'):
        ex.Parser(families=WANTED, cache_size=-1)


def test_a_known_label_set_with_a_bad_value_later_is_reported() -> None:
    parser = ex.Parser(families=F)
    assert parser.parse(page='m{a="1"} 1\n').samples == (Sample('m', (('a', '1'),), 1.0),)
    page = parser.parse(page='m{a="1"} one\nm{a="1"} 2 yesterday\nm{a="1"} NaN\n')
    assert page.errors == ('line 1: bad value "one"', 'line 2: bad timestamp "yesterday"')
    assert (page.samples, page.dropped_non_finite) == ((), 1)


def test_parse_families_of_a_parser() -> None:
    parser = ex.Parser(families=frozenset({'x', 'x_total'}))
    groups = parser.parse_families(page='x_total 1\nx_sum 2\n')
    assert groups == {'x': [Sample('x_sum', (), 2.0)], 'x_total': [Sample('x_total', (), 1.0)]}


def test_a_family_that_is_not_a_metric_name_owns_nothing() -> None:
    families = frozenset({'m', 'a b', 'c}', ''})
    page = parse(page='m 1\na b 2\nc} 3\n 4\n# TYPE a b gauge\n', families=families)
    assert page == Page((Sample('m', (), 1.0),), (), 0, ())


# --- syntax ------------------------------------------------------------------------------------

F = frozenset({'m', 'vllm:num_requests_waiting'})


def test_empty_pages() -> None:
    assert parse(page=b'', families=WANTED) == Page((), (), 0, ())
    assert parse(page='\n\n# only a comment\n', families=WANTED) == Page((), (), 0, ())
    assert parse(page='m 1\n', families=frozenset()) == Page((), (), 0, ())


def test_label_escaping_matches_the_official_parser() -> None:
    text = (
        'm{a="C:\\\\dir",b="say \\"hi\\"",c="x\\ny",d="a,b",e="}",f="\\t"} 1\n'
        'm{} 2\n'
        'm{z="1",} 3\n'
        'm { y = "2" , } 4\n'
    )
    page = parse(page=text, families=F)
    assert as_dict(page) == official(text, F)
    assert page.samples[0].labels == (
        ('a', 'C:\\dir'),
        ('b', 'say "hi"'),
        ('c', 'x\ny'),
        ('d', 'a,b'),
        ('e', '}'),
        ('f', '\\t'),  # an unknown escape stays as written, as in the official parser
    )
    assert [s.labels for s in page.samples[1:]] == [(), (('z', '1'),), (('y', '2'),)]
    assert page.errors == ()


def test_labels_come_back_sorted() -> None:
    page = parse(page='m{zeta="1",alpha="2",mid="3"} 1\n', families=F)
    assert page.samples[0].labels == (('alpha', '2'), ('mid', '3'), ('zeta', '1'))


def test_colons_are_kept_and_only_owned_names_are_read() -> None:
    text = (
        'vllm:num_requests_waiting{engine="0"} 3\n'
        'vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 3\n'
        'vllm_num_requests_waiting{engine="0"} 9\n'
        'm_bucket{le="1"} 1\n'
        'm_total 2\n'
        'm_created 1.7e9\n'
        'm_other 5\n'
    )
    page = parse(page=text, families=F)
    assert [(s.name, s.value) for s in page.samples] == [
        ('vllm:num_requests_waiting', 3.0),
        ('m_bucket', 1.0),
        ('m_total', 2.0),
        ('m_created', 1.7e9),
    ]


def test_exact_family_name_wins_over_a_suffix() -> None:
    families = frozenset({'x', 'x_total'})
    assert ex.family_of(name='x_total', families=families) == 'x_total'
    assert ex.family_of(name='x_sum', families=families) == 'x'
    assert ex.family_of(name='y_sum', families=families) is None
    groups = ex.parse_families(page='x_total 1\nx_sum 2\n', families=families)
    assert groups == {'x': [Sample('x_sum', (), 2.0)], 'x_total': [Sample('x_total', (), 1.0)]}


def test_openmetrics_additions_are_tolerated() -> None:
    text = (
        'm_total{a="1"} 10 1700000000000\n'
        'm_bucket{le="0.5"} 3 # {trace_id="abc"} 0.2 1700000000.1\n'
        'm_created{a="1"} 1700000000.5\n'
        '# EOF\n'
        'm_total{a="2"} 99\n'
    )
    page = parse(page=text, families=F)
    assert as_dict(page) == {
        ('m_total', (('a', '1'),)): 10.0,
        ('m_bucket', (('le', '0.5'),)): 3.0,
        ('m_created', (('a', '1'),)): 1700000000.5,
    }
    assert page.errors == ()


def test_crlf_indentation_and_tabs() -> None:
    text = 'm{a="1"} 1\r\n   m{a="2"}\t2\r\n\tm 3\r\n'
    page = parse(page=text, families=F)
    assert [s.value for s in page.samples] == [1.0, 2.0, 3.0]
    assert page.errors == ()


def test_non_finite_values_are_dropped_and_counted() -> None:
    text = 'm{a="1"} NaN\nm{a="2"} +Inf\nm{a="3"} -Inf\nm_bucket{le="+Inf"} 7\nm{a="4"} Inf\n'
    page = parse(page=text, families=F)
    assert page.samples == (Sample('m_bucket', (('le', '+Inf'),), 7.0),)
    assert page.dropped_non_finite == 4
    assert page.errors == ()


def test_float_forms() -> None:
    text = 'm{a="1"} 1e3\nm{a="2"} -0.5\nm{a="3"} 42\nm{a="4"} .5E-1\n'
    assert [s.value for s in parse(page=text, families=F).samples] == [1000.0, -0.5, 42.0, 0.05]


# --- bad input -----------------------------------------------------------------------------------


def test_a_counter_with_a_string_value_is_an_error() -> None:
    text = '# TYPE m_total counter\nm_total{a="1"} abc\nm_total{a="2"} 5\n'
    page = parse(page=text, families=F)
    assert page.errors == ('line 2: bad value "abc"',)
    assert page.samples == (Sample('m_total', (('a', '2'),), 5.0),)
    assert page.types == (('m_total', 'counter'),)


@pytest.mark.parametrize(
    ('line', 'message'),
    [
        ('m{a="1" 1', 'malformed sample line "m{a="1" 1"'),
        ('m{a=1} 1', 'malformed sample line "m{a=1} 1"'),
        ('m{,} 1', 'malformed sample line "m{,} 1"'),
        ('m', 'malformed sample line "m"'),
        ('m{a="1"}', 'malformed sample line "m{a="1"}"'),
        ('m 1 2 3', 'malformed sample line "m 1 2 3"'),
        ('m{a="1",a="2"} 1', 'a label is given twice in "m{a="1",a="2"} 1"'),
        ('m} 1', 'malformed sample line "m} 1"'),
        # the general grammar allows no blank after the label set: `{b="2"}` is the value
        ('m{a="1"}{b="2"} 1', 'bad value "{b="2"}"'),
        ('m 1_000', 'bad value "1_000"'),
        ('m 0x10', 'bad value "0x10"'),
        ('m 1 yesterday', 'bad timestamp "yesterday"'),
        ('# TYPE m', 'bad TYPE line "# TYPE m"'),
        ('# TYPE m counterish', 'bad TYPE line "# TYPE m counterish"'),
    ],
)
def test_malformed_wanted_lines_are_reported_with_their_line(line: str, message: str) -> None:
    page = parse(page=f'other 1\n{line}\nm{{a="ok"}} 7\n', families=F)
    assert page.errors == (f'line 2: {message}',)
    assert page.samples == (Sample('m', (('a', 'ok'),), 7.0),)


def test_malformed_lines_of_other_families_are_not_examined() -> None:
    page = parse(page='other{{{ 1\n}}} garbage\nmore_stuff x y z\nm 1\n', families=F)
    assert page.errors == ()
    assert page.samples == (Sample('m', (), 1.0),)


def test_duplicate_series_keep_the_last_value_and_are_reported() -> None:
    text = 'm{a="1"} 1\nm{a="2"} 2\nm{a="1"} 3\n# TYPE m gauge\n# TYPE m counter\n'
    page = parse(page=text, families=F)
    assert page.samples == (Sample('m', (('a', '1'),), 3.0), Sample('m', (('a', '2'),), 2.0))
    assert page.errors == (
        'line 3: duplicate series "m{a="1"} 3"; the last value is kept',
        'line 5: second TYPE line for m; the first is kept',
    )
    assert page.types == (('m', 'gauge'),)


def test_the_same_series_in_another_label_order_is_a_duplicate() -> None:
    page = parse(page='m{a="1",b="2"} 1\nm{b="2",a="1"} 2\n', families=F)
    assert page.samples == (Sample('m', (('a', '1'), ('b', '2')), 2.0),)
    assert page.errors == ('line 2: duplicate series "m{b="2",a="1"} 2"; the last value is kept',)


@pytest.mark.parametrize(
    ('text', 'values'),
    [
        ('m 1\n# EOF\nm{a="2"} 2\n', [1.0]),
        ('m 1\r\n  # EOF \t\r\nm{a="2"} 2\r\n', [1.0]),
        ('m 1\n# EOF', [1.0]),
        ('m 1\n# EOFX\nm{a="2"} 2\n', [1.0, 2.0]),  # not the end marker
        ('m 1\n#EOF\nm{a="2"} 2\n', [1.0, 2.0]),
    ],
)
def test_eof_ends_the_page(text: str, values: list[float]) -> None:
    page = parse(page=text, families=F)
    assert [s.value for s in page.samples] == values
    assert page.errors == ()


def test_an_exemplar_line_reads_the_same_on_every_page() -> None:
    text = 'm_bucket{le="0.5"} 3 # {trace_id="abc"} 0.2 1700000000.1\nm_bucket{le="1"} 4\n'
    parser = ex.Parser(families=F)
    first = parser.parse(page=text)
    assert first.samples == (
        Sample('m_bucket', (('le', '0.5'),), 3.0),
        Sample('m_bucket', (('le', '1'),), 4.0),
    )
    assert parser.parse(page=text) == first


def test_truncated_page() -> None:
    raw = example_page()
    cut = raw.index(b'vllm:kv_cache_usage_perc{') + 40
    page = parse(page=raw[:cut], families=WANTED)
    assert {s.name for s in page.samples} == {
        'vllm:num_requests_running',
        'vllm:num_requests_waiting',
    }
    line = raw[:cut].count(b'\n') + 1
    assert page.errors == (f'line {line}: truncated line at the end of the page, not kept',)


def test_a_complete_looking_last_line_without_newline_is_not_trusted() -> None:
    # `m 12` could be the first two digits of `m 1234`.
    page = parse(page='m{a="1"} 1\nm 12', families=F)
    assert page.samples == (Sample('m', (('a', '1'),), 1.0),)
    assert page.errors == ('line 2: truncated line at the end of the page, not kept',)
    # An unterminated last line of another family, or `# EOF`, is not an error.
    assert parse(page='m 1\nother 2', families=F).errors == ()
    assert parse(page='m 1\n# EOF', families=F).errors == ()


def test_non_utf8_bytes_are_replaced_and_the_rest_parses() -> None:
    raw = b'm{a="caf\xe9"} 1\n\xff\xfe{{ junk\nm{a="ok"} 2\nm\xff 3\n'
    page = parse(page=raw, families=F)
    assert page.samples == (
        Sample('m', (('a', 'caf\ufffd'),), 1.0),
        Sample('m', (('a', 'ok'),), 2.0),
    )
    assert page.errors == ('line 4: malformed sample line "m\ufffd 3"',)


def test_huge_page_of_other_families() -> None:
    filler = 'http_requests_total{handler="/v1/completions",method="POST",status="200"} 12345.0\n'
    blocks = [filler * 42_000] * 3  # 3 × 42,000 × 82 bytes ≈ 10.3 MB
    text = (
        'vllm:num_requests_waiting{engine="0"} 1\n'
        + blocks[0]
        + 'vllm:num_requests_waiting{engine="1"} 2\n'
        + blocks[1]
        + blocks[2]
        + 'vllm:num_requests_waiting{engine="2"} 3\n'
    )
    assert len(text) > 10_000_000
    page = parse(page=text.encode(), families=WANTED)
    assert [(s.label('engine'), s.value) for s in page.samples] == [
        ('0', 1.0),
        ('1', 2.0),
        ('2', 3.0),
    ]
    assert page.errors == ()


def test_a_page_of_garbage_lists_a_bounded_number_of_errors() -> None:
    page = parse(page='m{ oops\n' * 5000, families=F)
    assert len(page.errors) == ex.MAX_ERRORS + 1
    assert page.errors[0] == 'line 1: malformed sample line "m{ oops"'
    assert page.errors[-1] == f'{5000 - ex.MAX_ERRORS} more errors not listed'


def test_long_lines_are_shortened_in_messages() -> None:
    page = parse(page='m ' + 'x' * 500 + '\n', families=F)
    assert page.errors == ('line 1: bad value "' + 'x' * 80 + '..."',)


# --- random pages --------------------------------------------------------------------------------

HYP_WANTED = frozenset(
    {'vllm:kv_cache_usage_perc', 'vllm:request_success', 'vllm:ttft_seconds', 'q_size'}
)
NAMES = st.sampled_from(
    [
        'vllm:kv_cache_usage_perc',
        'vllm:request_success',
        'vllm:ttft_seconds',
        'q_size',
        'vllm:kv_cache_usage',  # a prefix of a wanted family, not owned
        'vllm:request_success_rate',
        'q_size_total_bytes',
        'other_metric',
    ]
)
SUFFIXES = st.sampled_from(['', '', '_bucket', '_sum', '_count', '_total', '_created'])
LABEL_NAMES = st.sampled_from(['engine', 'le', 'model_name', 'a_b', 'x'])
NON_FINITE = ['NaN', 'nan', '+Inf', '-Inf', 'Inf']


def escape(value: str) -> str:
    return value.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


@st.composite
def sample_lines(draw: st.DrawFn) -> tuple[str, Key, float | None]:
    """A well-formed sample line, its key, and its value (None when it is NaN or ±Inf)."""
    name = draw(NAMES) + draw(SUFFIXES)
    labels = draw(st.dictionaries(LABEL_NAMES, st.text(max_size=12), max_size=4))
    pairs = [f'{k}{draw(st.sampled_from(["=", " = "]))}"{escape(v)}"' for k, v in labels.items()]
    text = name
    braces = draw(st.booleans())
    if pairs or braces:
        # A trailing comma is allowed after a pair; `{,}` is not (Prometheus rejects it).
        trailing = draw(st.sampled_from(['', ','])) if pairs else ''
        text += '{' + draw(st.sampled_from([',', ', '])).join(pairs) + trailing + '}'
    value: float | None
    if draw(st.integers(0, 9)) == 0:
        value_text, value = draw(st.sampled_from(NON_FINITE)), None
    else:
        value = draw(st.floats(allow_nan=False, allow_infinity=False))
        integral = value.is_integer() and abs(value) < 1e15
        value_text = str(int(value)) if integral and draw(st.booleans()) else repr(value)
    text += draw(st.sampled_from([' ', '\t', '  '])) + value_text
    if draw(st.booleans()):
        text += f' {draw(st.integers(0, 2**41))}'
    if draw(st.integers(0, 4)) == 0:
        text += ' # {trace_id="t"} 1.5'
    if draw(st.integers(0, 4)) == 0:
        text = draw(st.sampled_from([' ', '\t'])) + text
    key = (name, tuple(sorted(labels.items())))
    return text, key, value


no_newline = st.text(alphabet=st.characters(codec='utf-8', exclude_characters='\n}'), max_size=30)
GARBAGE = st.one_of(
    # a wanted name with a label set that never closes
    st.builds(lambda n, t: f'{n}{{{t}', NAMES, no_newline),
    # a wanted name with a value that is not a number
    st.builds(lambda n, t: f'{n} {t}', NAMES, st.text(alphabet='xyzq!', min_size=1)),
    # lines no exporter would write
    st.builds(lambda t: '}' + t, no_newline),
    st.builds(lambda t: '# ' + t, no_newline).filter(lambda t: not t.startswith('# EOF')),
    st.just(''),
    st.just('   '),
)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.one_of(sample_lines(), GARBAGE.map(lambda g: (g, None, None))),
        max_size=40,
    ),
    as_bytes=st.booleans(),
)
def test_random_pages_never_raise_and_keep_every_wanted_sample(
    lines: list[tuple[str, Key | None, float | None]], as_bytes: bool
) -> None:
    expected: dict[Key, float] = {}
    dropped = 0
    for _, key, value in lines:
        if key is None or ex.family_of(name=key[0], families=HYP_WANTED) is None:
            continue
        if value is None:
            dropped += 1
        else:
            expected[key] = value
    text = ''.join(line + '\n' for line, _, _ in lines)
    parser = ex.Parser(families=HYP_WANTED)
    page = parser.parse(page=text.encode() if as_bytes else text)
    assert as_dict(page) == expected
    assert page.dropped_non_finite == dropped
    # The second parse reads the label sets the first one remembered; a Parser that forgets
    # after every text reads the same, and so do CRLF line ends.
    assert parser.parse(page=text) == page
    assert ex.Parser(families=HYP_WANTED, cache_size=1).parse(page=text) == page
    assert parser.parse(page=text.replace('\n', '\r\n')) == page


@given(
    words=st.frozensets(st.text(alphabet='ab:_', max_size=4), max_size=6),
    probe=st.text(alphabet='ab:_', max_size=5),
)
def test_the_scan_alternation_matches_exactly_its_words(words: frozenset[str], probe: str) -> None:
    pattern = re.compile(ex._alternation(words))
    for word in [*words, probe]:
        assert (pattern.fullmatch(word) is not None) == (word in words)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=400), families=st.frozensets(NAMES, max_size=3))
def test_arbitrary_bytes_never_raise(raw: bytes, families: frozenset[str]) -> None:
    page = parse(page=b'vllm:request_success_total{a="1"} 4\n' + raw, families=families)
    assert all(isinstance(s.value, float) and math.isfinite(s.value) for s in page.samples)
    assert all(error.startswith('line ') or 'more errors' in error for error in page.errors)


# --- caps ----------------------------------------------------------------------------------------

SMALL = ex.PageLimits(max_line_length=64, max_labels=3, max_series_per_page=4, max_series_chars=200)


def refused(text: str, limits: ex.PageLimits = SMALL) -> str | None:
    page = parse(page=text, families=F, limits=limits)
    if page.refused is not None:
        assert page == Page((), (), 0, (), page.refused)  # nothing of a refused page is kept
    return page.refused


def test_a_line_over_the_cap_refuses_the_page_in_every_shape() -> None:
    at_cap = 'm{a="' + 'x' * (64 - len('m{a=""} 1')) + '"} 1'
    assert len(at_cap) == 64
    assert refused(f'{at_cap}\n') is None
    over = at_cap.replace('x', 'xx', 1)
    escaped = over.replace('xx', 'x\\"', 1)  # the general grammar's line
    for page in (
        f'm 1\n{over}\nm{{a="2"}} 2\n',
        f'm 1\n{escaped}\n',
        f'm 1\n  {at_cap}\n',  # the blanks before a line are part of it
        f'm 1\n# TYPE m {"x" * 64}\n',
        f'm 1\n{over}',  # unterminated: not kept, and still refused
    ):
        assert refused(page) == 'line 2: a line over 64 characters (max_line_length)', page
    # A line of another family is skipped, however long.
    assert refused(f'other{{a="{"x" * 1000}"}} 1\nm 1\n') is None


def test_a_sample_over_the_label_cap_refuses_the_page() -> None:
    three = 'm{a="1",b="2",c="3"} 1\n'
    assert refused(three) is None
    message = 'line 2: a sample with 4 labels, over 3 (max_labels)'
    assert refused(three + 'm{a="1",b="2",c="3",d="4"} 1\n') == message
    assert refused(three + 'm{a="1",b="2",c="3",d="4\\n"} 1\n') == message  # general grammar
    # A value with `="` inside is one label, in the general grammar's shape.
    assert refused('m{a="=\\"",b="2",c="3"} 1\n') is None
    # Repeated names are counted before the pairs are compared (the hostile page's shape).
    assert refused('m{' + ','.join(['a="b"'] * 50) + '} 1\n', ex.PageLimits()) is None
    assert refused('m{' + ','.join(['a="b"'] * 200) + '} 1\n', ex.PageLimits()) == (
        'line 1: a sample with 200 labels, over 128 (max_labels)'
    )


def test_series_over_the_page_cap_refuse_it_duplicates_do_not_count() -> None:
    four = ''.join(f'm{{a="{i}"}} 1\n' for i in range(4))
    assert refused(four + four) is None  # repeated series are reported, not counted twice
    assert refused(four + 'm{a="4"} 1\n') == 'line 5: more than 4 series (max_series_per_page)'
    assert refused(four + 'm{a="4",b="\\n"} 1\n') == (
        'line 5: more than 4 series (max_series_per_page)'
    )


def test_series_over_the_character_cap_refuse_the_page() -> None:
    limits = ex.PageLimits(max_series_chars=100)
    lines = [f'm{{a="{i}",b="{"y" * 30}"}} 1\n' for i in range(3)]  # 42 characters of head
    assert refused(''.join(lines[:2]), limits) is None
    assert refused(''.join(lines), limits) == (
        'line 3: series of more than 100 characters (max_series_chars)'
    )


def test_a_refused_page_leaves_the_parser_reading_the_next_one() -> None:
    parser = ex.Parser(families=F, limits=SMALL)
    assert parser.parse(page='m{a="1",b="2",c="3",d="4"} 1\n').refused is not None
    assert parser.parse(page='m{a="1"} 1\n').samples == (Sample('m', (('a', '1'),), 1.0),)
    assert parser.limits == SMALL


@pytest.mark.parametrize('name', ['max_line_length', 'max_labels', 'max_series_per_page'])
@pytest.mark.parametrize('value', [0, -1, 1.5, True])
def test_a_cap_below_one_or_not_whole_is_refused(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=f'{name} must be a whole number of at least 1'):
        ex.PageLimits(**{name: value})  # type: ignore[arg-type]


def test_the_memory_is_bounded_in_characters() -> None:
    parser = ex.Parser(families=F, cache_chars=100)
    for i in range(50):
        parser.parse(page=f'm{{a="{i}",b="{"y" * 20}"}} 1\n')
        assert parser.remembered_chars <= 100
    assert parser.remembered >= 1
    # A key longer than the whole budget is not remembered, and the page reads the same.
    page = parser.parse(page=f'm{{a="{"z" * 200}"}} 1\n')
    assert page.samples == (Sample('m', (('a', 'z' * 200),), 1.0),)
    assert parser.remembered_chars <= 100
    with pytest.raises(ValueError, match='cache_chars'):
        ex.Parser(families=F, cache_chars=-1)


def test_the_hostile_label_page_is_refused_in_little_memory() -> None:
    # 1.75 million pairs on one line once took the parser's peak from 44 MB to 1.25 GB.
    page = 'vllm:num_requests_waiting{' + ','.join(['a="b"'] * 1_750_000) + '} 1\n'
    tracemalloc.start()
    try:
        found = parse(page=page, families=VLLM_FAMILIES)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found.refused == 'line 1: a line over 65536 characters (max_line_length)'
    # The page after a newline (its one copy) and a little more.
    assert peak < len(page) + 2 * 1024 * 1024


def test_a_head_longer_than_a_real_one_is_read_but_not_remembered() -> None:
    parser = ex.Parser(families=F)
    long = 'm{a="' + 'x' * ex.REMEMBERED_KEY_CHARS + '"} 1\n'
    for _ in range(2):
        assert parser.parse(page=long).samples == (
            Sample('m', (('a', 'x' * ex.REMEMBERED_KEY_CHARS),), 1.0),
        )
        assert parser.remembered == 0
    parser.parse(page='m{a="1"} 1\n')
    assert parser.remembered == 1
