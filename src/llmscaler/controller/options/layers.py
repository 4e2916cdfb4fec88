"""The layers an option of `llmscaler run` is read from, and the command line itself.

Why: every value must be checked wherever it is given, even where a higher layer overrides it,
and a bad one recorded as a one-line `ConfigError` naming the flag, the variable or the file key;
`controller.options.resolve` resolves the options through one `Layers` value.

- `read_argv`: the flags given (dest → text) and the problems of the command line. An unknown
  argument's value is never shown (it may be the value of a misspelt secret flag): `--name=value`
  is named by `--name`, a bare word only by its position among the unknown ones.
- `Layers`: command line > environment > config file (the `in_file` options). `pick` checks the
  option's value in every layer that holds it, records each bad one and returns the highest valid
  one with its text; `get` the value only; `problem` records a problem found across options.
  Values of secret options are never part of an error; URLs lose their `user:password@`.

What fails: nothing raises; problems are collected in `Layers.errors`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from llmscaler.config.errors import ConfigError, show_setting
from llmscaler.controller.options import values
from llmscaler.controller.options.table import BY_DEST, Option, add_arguments


class _ArgvError(Exception):
    pass


class _QuietParser(argparse.ArgumentParser):
    """Reports an argument error as a value instead of printing it and exiting."""

    def error(self, message: str) -> NoReturn:
        raise _ArgvError(message)


def read_argv(argv: Sequence[str]) -> tuple[dict[str, str], list[ConfigError]]:
    """The flags given (dest → text) and the problems; an unknown argument's value is never
    shown, since it may be the value of a misspelt secret flag."""
    parser = _QuietParser(prog='llmscaler run', allow_abbrev=False)
    add_arguments(parser)
    try:
        parsed, extra = parser.parse_known_args(list(argv))
    except _ArgvError as exc:
        return {}, [ConfigError(source='command line', message=str(exc))]
    cli = {dest: text for dest, text in vars(parsed).items() if text is not None}
    errors: list[ConfigError] = []
    for position, arg in enumerate(extra, start=1):
        if arg.startswith('-'):
            name = arg.split('=', 1)[0]
            hidden = ' (its value is not shown)' if '=' in arg else ''
            message = f'unknown flag{hidden}; `llmscaler run --help` lists the flags'
            errors.append(ConfigError(source='command line', key=name, message=message))
        else:
            message = (
                f'unexpected argument (the {_ordinal(position)} unknown one, not shown: it may be '
                'the value of a misspelt flag); `llmscaler run --help` lists the flags'
            )
            errors.append(ConfigError(source='command line', message=message))
    return cli, errors


def _ordinal(number: int) -> str:
    return {1: 'first', 2: 'second', 3: 'third'}.get(number, f'{number}th')


def _shown(option: Option, key: str, text: str) -> str:
    if option.secret:
        return ''
    return show_setting(key, values.redact_url(text) if option.parse is values.url else text)


class Layers:
    """Checks each option's value in every layer; the highest valid one wins."""

    def __init__(self, *, cli: Mapping[str, str], env: Mapping[str, str]) -> None:
        self.cli = cli
        self.env = env
        self.file: Mapping[str, tuple[str, str]] = {}
        self.errors: list[ConfigError] = []

    def found(self, option: Option) -> list[tuple[str, str, str]]:
        """(source, key, text) of every layer that holds the option, highest first."""
        found: list[tuple[str, str, str]] = []
        if option.dest in self.cli:
            found.append(('command line', option.flag, self.cli[option.dest]))
        if option.env in self.env:
            found.append(('environment', option.env, self.env[option.env]))
        if option.in_file and option.env in self.file:
            text, source = self.file[option.env]
            found.append((source, option.env, text))
        return found

    def pick(self, dest: str) -> tuple[Any, str] | None:
        """(value, text) of the highest layer with a valid value; every layer's value is
        checked, a bad one recorded."""
        option = BY_DEST[dest]
        chosen: tuple[Any, str] | None = None
        for source, key, text in self.found(option):
            try:
                value = option.parse(text)
            except ValueError as exc:
                shown = _shown(option, key, text)
                self.errors.append(
                    ConfigError(source=source, key=key, value=shown, message=str(exc))
                )
                continue
            if chosen is None:
                chosen = (value, text)
        return chosen

    def get(self, dest: str) -> Any:
        """The option's value from the highest layer, None when no layer holds a valid one."""
        chosen = self.pick(dest)
        return None if chosen is None else chosen[0]

    def problem(self, *, key: str, message: str, value: str = '') -> None:
        self.errors.append(ConfigError(source='options', key=key, value=value, message=message))
