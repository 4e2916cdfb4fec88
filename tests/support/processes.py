"""A process's children and memory, read from /proc: for tests of what a process starts and
what it costs (the controller keeps its scraped windows in a child process of its own)."""

from __future__ import annotations

import re
from pathlib import Path


def children(pid: int) -> set[int]:
    """The processes `pid` started that are still there."""
    found: set[int] = set()
    for task in Path(f'/proc/{pid}/task').iterdir():
        found.update(int(child) for child in (task / 'children').read_text().split())
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, ended but not reaped, does not)."""
    stat = Path(f'/proc/{pid}/stat')
    try:
        return stat.read_text().split(') ')[1][0] != 'Z'
    except FileNotFoundError:
        return False


def tree_memory(pid: int, field: str) -> int:
    """`VmRSS` or `VmHWM` (each one's peak) summed over `pid` and every process below it, in
    bytes: what they hold of a container's memory limit (peaks summed: at most, never less)."""
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            status = Path(f'/proc/{current}/status').read_text()
            pending.extend(children(current))
        except FileNotFoundError:
            continue  # ended meanwhile
        found = re.search(rf'^{field}:\s+(\d+) kB$', status, re.MULTILINE)
        total += int(found.group(1)) * 1024 if found else 0
    return total
