"""Generated blocks in a page: what stands between a pair of markers, replaced by a script's text.

Why: every script of bench/ that writes figures into a page (README.md, docs/*.md) keeps them
between a begin and an end marker, so that a rerun replaces its own figures and nothing else;
one function does it for all of them.

What fails: a page without the begin marker, or without the end marker after it, stops the
script with the page's name and the markers, before anything is written.
"""

from __future__ import annotations

from pathlib import Path


def replace(text: str, *, markers: tuple[str, str], body: str, where: str) -> str:
    """`text` with what stands between `markers` replaced by `body` on lines of its own."""
    begin, end = markers
    head, found, rest = text.partition(begin)
    if not found or end not in rest:
        raise SystemExit(f'{where}: markers {begin} … {end} not found')
    _, _, tail = rest.partition(end)
    return f'{head}{begin}\n{body}\n{end}{tail}'


def write(path: Path, *, markers: tuple[str, str], body: str) -> None:
    """Replace the block between `markers` in the page at `path` by `body`."""
    text = path.read_text(encoding='utf-8')
    path.write_text(replace(text, markers=markers, body=body, where=path.name), encoding='utf-8')


def emit(path: Path, *, markers: tuple[str, str], body: str, write_docs: bool) -> None:
    """Print `body` and, with `write_docs`, put it between `markers` in the page at `path`
    (what every such script does with the text it made)."""
    print(body)
    if write_docs:
        write(path, markers=markers, body=body)
        print(f'wrote {path.parent.name}/{path.name}')
