"""The running llmscaler's version: what `llmscaler --version` prints and the controller's
`llmscaler_build_info` metric carries.

Why one function: the command line and the metric must never name two versions. It reads the
installed distribution's metadata; a source tree that is not installed has none, and says
`unknown` rather than guess.
"""

from __future__ import annotations

from importlib import metadata

__all__ = ['version']


def version() -> str:
    """The installed `llmscaler` distribution's version, or `unknown` when it is not installed."""
    try:
        return metadata.version('llmscaler')
    except metadata.PackageNotFoundError:
        return 'unknown'
