"""`llmscaler manifests`: the command line (see docs/manifests.md).

Why: writing these objects by hand is where the known mistakes happen (an `avg()` query under
AverageValue, a tolerance that swallows ±1 steps, a live ScaledObject that pins a GPU node), so
the command writes them from the same VariantAutoscalings the controller reads.

What fails: every bad flag or file is one line on stderr (`llmscaler manifests: ...`) and exit
status 2, before anything is written: an unknown or malformed flag, a flag that does not apply
to the chosen actuation (`--profile` or `--queue-per-replica` with `--actuation metrics`,
`--via` or `--min-replicas` with queue actuation), a number that is not finite or out of range,
a floor above a target's maxReplicas, no target at all, a VA file that does not read or a
cluster that cannot be listed (`targets.TargetError`), an output file that cannot be written.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import yaml

from llmscaler.manifests import objects
from llmscaler.manifests.cluster import from_cluster
from llmscaler.manifests.targets import (
    Target,
    TargetError,
    check_name,
    from_flag,
    from_va_file,
    unique,
)

EXIT_BAD_INPUT = 2


class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line (no usage block) through `_Usage`."""

    def error(self, message: str) -> NoReturn:
        raise _Usage(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog='llmscaler manifests',
        description='Write KEDA ScaledObjects or HPAs for VariantAutoscalings (docs/manifests.md).',
    )
    parser.add_argument(
        '--va',
        action='append',
        type=Path,
        default=[],
        metavar='FILE',
        help='VariantAutoscaling YAML/JSON file (repeatable; other kinds skipped)',
    )
    parser.add_argument(
        '--target',
        action='append',
        default=[],
        metavar='KIND/NAME',
        help='a scale target by flags: Deployment/NAME, StatefulSet/NAME or '
        'LeaderWorkerSet/NAME (repeatable)',
    )
    parser.add_argument(
        '--from-cluster',
        action='store_true',
        help='the VariantAutoscalings of the cluster (of --namespace, or of every namespace '
        'with --all-namespaces)',
    )
    parser.add_argument(
        '--all-namespaces', action='store_true', help='with --from-cluster: every namespace'
    )
    parser.add_argument(
        '--server',
        help='with --from-cluster: API server URL used without authentication (kubectl proxy); '
        'default: the kubeconfig, or the in-cluster service account',
    )
    parser.add_argument('--kubeconfig', help='with --from-cluster: kubeconfig file')
    parser.add_argument(
        '--namespace',
        default='default',
        help='namespace of --target and --from-cluster, and of VAs without one (default: default)',
    )
    parser.add_argument('--max-replicas', help='maxReplicas of --target (default 10)')
    parser.add_argument(
        '--min-replicas', help='minReplicas of --target with --actuation metrics (default 1)'
    )
    parser.add_argument(
        '--actuation',
        choices=('queue', 'metrics'),
        default='queue',
        help='queue: the common KEDA setup on num_requests_waiting '
        "(default); metrics: follow llmscaler's wva_desired_replicas",
    )
    parser.add_argument(
        '--via',
        choices=('hpa', 'keda'),
        help='with --actuation metrics: an HPA (default) or a ScaledObject',
    )
    parser.add_argument(
        '--profile',
        choices=tuple(objects.PROFILES),
        help='replica floor with queue actuation: prod 2 (default), dev 1, cost 0',
    )
    parser.add_argument('--queue-per-replica', help='waiting requests per replica (default 5)')
    parser.add_argument('--kv-target', help='KV-cache usage per replica, 0-1 (default 0.8)')
    parser.add_argument(
        '--prometheus',
        default=objects.DEFAULT_PROMETHEUS,
        help=f'Prometheus URL for KEDA (default {objects.DEFAULT_PROMETHEUS})',
    )
    parser.add_argument(
        '--series',
        default=objects.DEFAULT_SERIES,
        help="PromQL matchers selecting a target's pods, with {namespace} and "
        f'{{target}} (default {objects.DEFAULT_SERIES})',
    )
    parser.add_argument(
        '--unpaused', action='store_true', help='write ScaledObjects without the paused annotation'
    )
    parser.add_argument('--out', type=Path, help='output file (default: standard output)')
    return parser


def _count(text: str | None, *, flag: str, default: int, low: int) -> int:
    if text is None:
        return default
    value = text.strip()
    if not value.isascii() or not value.isdigit() or int(value) < low:
        raise _Usage(f'{flag}: expected an integer >= {low}, got {text!r}')
    return int(value)


def _real(text: str | None, *, flag: str, default: float, upper: float | None = None) -> float:
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise _Usage(f'{flag}: expected a number, got {text!r}') from None
    if not math.isfinite(value) or value <= 0 or (upper is not None and value > upper):
        bound = f'in (0, {upper:g}]' if upper is not None else '> 0'
        raise _Usage(f'{flag}: expected a finite number {bound}, got {text!r}')
    return value


def _check_applicable(args: argparse.Namespace) -> None:
    if args.actuation == 'metrics':
        for flag, value in (
            ('--profile', args.profile),
            ('--queue-per-replica', args.queue_per_replica),
            ('--kv-target', args.kv_target),
        ):
            if value is not None:
                raise _Usage(f'{flag} applies to --actuation queue, not metrics')
        if args.series != objects.DEFAULT_SERIES:
            raise _Usage('--series applies to --actuation queue, not metrics')
    else:
        for flag, value in (('--via', args.via), ('--min-replicas', args.min_replicas)):
            if value is not None:
                raise _Usage(f'{flag} applies to --actuation metrics, not queue')
    if args.unpaused and args.actuation == 'metrics' and args.via != 'keda':
        raise _Usage('--unpaused applies to ScaledObjects (queue, or metrics with --via keda)')
    if '://' not in args.prometheus:
        raise _Usage(
            f'--prometheus: expected a URL such as http://host:9090, got {args.prometheus!r}'
        )
    try:
        args.series.format(namespace='ns', target='t')
    except (KeyError, IndexError, ValueError):
        raise _Usage(
            '--series: only {namespace} and {target} may be used as placeholders'
        ) from None


def _targets(args: argparse.Namespace) -> list[Target]:
    check_name(value=args.namespace, where='--namespace')
    maximum = _count(args.max_replicas, flag='--max-replicas', default=10, low=1)
    minimum = _count(args.min_replicas, flag='--min-replicas', default=1, low=0)
    if args.max_replicas is not None and not args.target:
        raise _Usage('--max-replicas applies to --target (a VA file carries its own bounds)')
    if minimum > maximum:
        raise _Usage(f'--min-replicas {minimum} is above --max-replicas {maximum}')
    for flag, value in (
        ('--all-namespaces', args.all_namespaces),
        ('--server', args.server),
        ('--kubeconfig', args.kubeconfig),
    ):
        if value and not args.from_cluster:
            raise _Usage(f'{flag} applies to --from-cluster')
    if args.server and args.kubeconfig:
        raise _Usage('--server and --kubeconfig: give one of them')
    found: list[Target] = []
    if args.from_cluster:
        found.extend(
            from_cluster(
                server=args.server,
                kubeconfig=args.kubeconfig,
                namespace=None if args.all_namespaces else args.namespace,
            )
        )
    for path in args.va:
        found.extend(from_va_file(path=path, namespace=args.namespace))
    for text in args.target:
        found.append(
            from_flag(
                text=text, namespace=args.namespace, min_replicas=minimum, max_replicas=maximum
            )
        )
    if not found:
        raise _Usage('nothing to write for: give --va FILE, --from-cluster or --target KIND/NAME')
    return unique(found)


def build(args: argparse.Namespace) -> list[objects.Manifest]:
    """The manifests for parsed arguments (raises `_Usage` or `TargetError`)."""
    _check_applicable(args)
    targets = _targets(args)
    if args.actuation == 'metrics':
        if args.via == 'keda':
            return [
                objects.desired_scaled_object(
                    target=t, prometheus=args.prometheus, paused=not args.unpaused
                )
                for t in targets
            ]
        return [objects.desired_hpa(target=t) for t in targets]
    options = objects.QueueOptions(
        profile=args.profile or 'prod',
        queue_per_replica=_real(args.queue_per_replica, flag='--queue-per-replica', default=5.0),
        kv_target=_real(args.kv_target, flag='--kv-target', default=0.8, upper=1.0),
        prometheus=args.prometheus,
        series=args.series,
        paused=not args.unpaused,
    )
    floor = objects.PROFILES[options.profile]
    for target in targets:
        if floor > target.max_replicas:
            raise _Usage(
                f'{target.namespace}/{target.variant}: profile {options.profile} needs '
                f'maxReplicas >= {floor}, it is {target.max_replicas}'
            )
    return [objects.queue_scaled_object(target=t, options=options) for t in targets]


def render(manifests: Sequence[objects.Manifest]) -> str:
    """A YAML stream, each object preceded by its comments."""
    parts = []
    for manifest in manifests:
        comments = ''.join(f'# {line}\n' for line in manifest.comments)
        body = yaml.safe_dump(manifest.object, sort_keys=False, default_flow_style=False)
        parts.append(comments + body)
    return '---\n'.join(parts)


def main(argv: Sequence[str]) -> int:
    """Entry point of `llmscaler manifests` (the arguments after the subcommand)."""
    try:
        args = _parser().parse_args(list(argv))
        if args.out is not None and args.out.is_dir():
            raise _Usage(f'--out: {args.out} is a directory')
        text = render(build(args))
    except (_Usage, TargetError) as exc:
        print(f'llmscaler manifests: {exc}', file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        args.out.write_text(text, encoding='utf-8')
    except OSError as exc:
        print(
            f'llmscaler manifests: --out: cannot write {args.out}: {exc.strerror or exc}',
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    return 0
