"""The one progress bar of a sweep: runs finished out of runs asked for, on stderr.

Why: a sweep's runs finish out of order on several workers, and a bar per run would be a wall of
bars; one bar counting finished runs (cached ones included) says how far the sweep is. Its total
grows as a search asks for more runs. It is drawn only when asked (`show=True`) or, by default
(`show=None`), when stderr is a terminal, so output that tests and scripts parse (stdout, or a
captured stderr) never holds it; `rich` erases it when the sweep ends (`transient`).

What fails: nothing; a bar that is not shown records nothing.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class Bar:
    """A bar labelled `label`; `add(count=n)` more runs asked for, `advance()` one finished."""

    def __init__(self, *, label: str, show: bool | None) -> None:
        self.shown = sys.stderr.isatty() if show is None else show
        self._progress: Progress | None = None
        self._label = label
        self._task: TaskID | None = None

    def _started(self) -> Progress:
        if self._progress is None:
            self._progress = Progress(
                TextColumn('{task.description:24}'),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self._label, total=0)
        return self._progress

    def add(self, *, count: int) -> None:
        if self.shown and count:
            progress = self._started()
            assert self._task is not None
            progress.update(self._task, total=(progress.tasks[0].total or 0) + count)

    def advance(self) -> None:
        if self.shown and self._progress is not None and self._task is not None:
            self._progress.advance(self._task)

    def counts(self) -> tuple[int, int]:
        """(finished, asked for) so far; (0, 0) for a bar not shown or not started."""
        if self._progress is None:
            return 0, 0
        task = self._progress.tasks[0]
        return int(task.completed), int(task.total or 0)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
