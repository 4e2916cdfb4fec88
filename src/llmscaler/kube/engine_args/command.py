"""The serving container of a pod template, and the command line that starts its engine.

Why: engine flags are written every which way in real manifests: in `command` or `args`, behind
Kubernetes `$(VAR)` references, inside `sh -c` scripts that set variables first; reading the
flags (`kube.engine_args.flags`) needs the one command line that starts the server, found here.

The serving container is the first container whose command line runs `vllm serve`,
`python -m vllm.entrypoints...` or `python -m sglang.launch_server`; failing that, the first
whose image name contains `vllm` (its args then go to the image's entrypoint). The command line
is `command + args` after Kubernetes `$(VAR)` expansion from the container's literal `env`;
`sh -c`/`bash -c` scripts are split with shlex into commands (at `;`, `&&`, `||`, `|`, `&`,
newlines), `$VAR`, `${VAR}` and `${VAR:-default}` are expanded from the container env and from
`NAME=value`/`export NAME=value` earlier in the script; scripts nested in scripts are followed
three deep.

What fails: nothing raises. An unterminated quote in a script falls back to splitting on
whitespace, with a warning; several serving containers: the first is used, with a warning; no
recognised serving container → None.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

_SHELLS = frozenset({'sh', 'bash', 'dash', 'zsh', 'ash', 'ksh'})
_SEPARATOR_CHARS = ';&|()\n'
_REDIRECTS = frozenset({'>', '>>', '<', '<<', '>&', '&>', '<&', '>|', '&>>', '<>'})
_ASSIGNMENT = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)=(.*)$', re.DOTALL)
_K8S_VAR = re.compile(r'\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)')
_SHELL_VAR = re.compile(r'\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)')


@dataclass(slots=True)
class Found:
    """A serving command line: its engine, its flags, the env it sees, the container's name, and
    the warnings gathered while reading it."""

    engine: str
    args: list[str]
    env: dict[str, str]
    container: str
    warnings: list[str] = field(default_factory=list)


def _literal_env(container: Mapping[str, object]) -> dict[str, str]:
    env: dict[str, str] = {}
    raw = container.get('env')
    if isinstance(raw, list):
        for item in raw:
            if isinstance(item, Mapping) and isinstance(item.get('name'), str):
                value = item.get('value')
                if isinstance(value, str):
                    env[str(item['name'])] = value
    return env


def _k8s_expand(text: str, env: Mapping[str, str]) -> str:
    def sub(match: re.Match[str]) -> str:
        if match.group(0) == '$$':
            return '$'
        name = match.group(1)
        return env.get(name, match.group(0))

    return _K8S_VAR.sub(sub, text)


def _shell_expand(token: str, env: Mapping[str, str]) -> str:
    def sub(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in env:
            return env[name]
        if match.group(2) is not None:
            return match.group(2)
        return match.group(0)

    return _SHELL_VAR.sub(sub, token)


def _split_script(script: str, warnings: list[str]) -> list[list[str]]:
    """A shell script as a list of simple commands (lists of words)."""
    text = script.replace('\\\r\n', ' ').replace('\\\n', ' ')
    lexer = shlex.shlex(text, posix=True, punctuation_chars=_SEPARATOR_CHARS + '<>')
    lexer.whitespace = ' \t\r'
    lexer.whitespace_split = True
    lexer.commenters = ''
    try:
        tokens = list(lexer)
    except ValueError as exc:
        warnings.append(f'shell script does not split ({exc}); split on whitespace instead')
        tokens = text.split()
    commands: list[list[str]] = [[]]
    skip_next = False
    in_comment = False
    for token in tokens:
        is_punct = bool(token) and all(ch in _SEPARATOR_CHARS + '<>' for ch in token)
        if in_comment:
            if is_punct and '\n' in token:
                in_comment = False
                commands.append([])
            continue
        if skip_next:
            skip_next = False
            continue
        if is_punct and token in _REDIRECTS:
            skip_next = True
        elif is_punct:
            commands.append([])
        elif token.startswith('#'):
            in_comment = True
        else:
            commands[-1].append(token)
    return [command for command in commands if command]


def _script_of(argv: Sequence[str]) -> str | None:
    """The script of `sh -c SCRIPT` (any listed shell, option clusters like `-ec`), or None."""
    if not argv or posixpath.basename(argv[0]) not in _SHELLS:
        return None
    for index in range(1, len(argv)):
        token = argv[index]
        if re.fullmatch(r'-[a-zA-Z]*c[a-zA-Z]*', token):
            rest = [t for t in argv[index + 1 :] if not t.startswith('-')]
            return rest[0] if rest else None
    return None


def _server(command: Sequence[str]) -> tuple[str, list[str]] | None:
    """(engine, flags) when the command starts a vLLM or SGLang server."""
    for index, token in enumerate(command):
        following = command[index + 1] if index + 1 < len(command) else ''
        if posixpath.basename(token) == 'vllm' and following == 'serve':
            return 'vllm', list(command[index + 2 :])
        if token == '-m' and following.startswith('vllm.entrypoints'):
            rest = list(command[index + 2 :])
            return 'vllm', rest[1:] if rest[:1] == ['serve'] else rest
        if token == '-m' and following == 'sglang.launch_server':
            return 'sglang', list(command[index + 2 :])
    return None


def _find_in(argv: list[str], env: dict[str, str], depth: int, warnings: list[str]) -> Found | None:
    script = _script_of(argv)
    commands = [argv] if script is None else _split_script(script, warnings)
    for raw in commands:
        command = [_shell_expand(token, env) for token in raw] if script is not None else raw
        words = command[1:] if command[:1] in (['export'], ['env']) else command
        for word in words:
            match = _ASSIGNMENT.match(word)
            if match is None:
                break
            env[match.group(1)] = match.group(2)
        if depth < 3 and _script_of(command) is not None:
            found = _find_in(command, env, depth + 1, warnings)
            if found is not None:
                return found
        server = _server(command)
        if server is not None:
            return Found(engine=server[0], args=server[1], env=dict(env), container='')
    return None


def _argv(container: Mapping[str, object], env: Mapping[str, str]) -> list[str]:
    argv: list[str] = []
    for key in ('command', 'args'):
        raw = container.get(key)
        if isinstance(raw, list):
            argv.extend(_k8s_expand(str(item), env) for item in raw if item is not None)
    return argv


def serving_container(
    *, containers: Sequence[Mapping[str, object]], warnings: list[str]
) -> Found | None:
    """The serving container's engine, flags and env, or None; warnings are appended."""
    by_command: list[Found] = []
    by_image: Found | None = None
    for index, container in enumerate(containers):
        if not isinstance(container, Mapping):
            continue
        name = container.get('name')
        label = name if isinstance(name, str) and name else f'#{index}'
        env = _literal_env(container)
        argv = _argv(container, env)
        found = _find_in(argv, dict(env), 0, warnings)
        if found is not None:
            by_command.append(replace(found, container=label))
            continue
        image = container.get('image')
        if by_image is None and isinstance(image, str) and 'vllm' in image.lower():
            by_image = Found(engine='vllm', args=argv, env=env, container=label)
    if len(by_command) > 1:
        names = ', '.join(repr(found.container) for found in by_command)
        warnings.append(f'several serving containers ({names}); using the first')
    return by_command[0] if by_command else by_image
