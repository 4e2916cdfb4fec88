"""The `llmscaler` command line.

Subcommands:

- `decide --snapshot FILE [--config FILE] [--state FILE] [--now T] [--state-out FILE]`: run one
  decision cycle of the core on a snapshot file and print the decisions and the new state as
  JSON. This answers "what would the autoscaler do now?" without a cluster.
- `schema`: print the JSON Schema of the snapshot file.
- `simulate [--scenario FILE] [--trace FILE] [--policy NAME ...] [--out DIR] ...`: replay a
  workload against a simulated vLLM fleet under each policy and report cost and SLO attainment.
- `tune [--scenario FILE|CASE] [--trace FILE] [--tune-policy NAME] [--budget N] [--seeds N] ...`:
  search a policy's settings (the predictive policy's, or WVA's percentage-based saturation
  thresholds) and the variants' replica bounds for the cheapest that meet an attainment target,
  and write the ConfigMap and VariantAutoscaling fields to apply with a report (docs/tune.md).
- `run [--leader-elect] [--watch-namespace NS] [--actuation direct|metrics|both] ...`: the
  Kubernetes controller (see `llmscaler run --help` and docs/controller.md).
- `emulate [--preset P] [--replicas N] [--base-port PORT] [--epp-port PORT] [--rate R] ...`:
  serve emulated vLLM pods in real time (see `llmscaler emulate --help`).
- `demo [--duration D] [--no-prometheus] ...`: the controller against a Kubernetes-free local
  cluster with emulated pods and a rising and falling load (see docs/demo.md).
- `manifests [--va FILE ...] [--target KIND/NAME ...] [--actuation queue|metrics] ...`: KEDA
  ScaledObjects or HPAs for VariantAutoscalings (see docs/manifests.md).

Bad input (a missing file, invalid JSON/YAML, a bad field, an invalid ConfigMap entry, a `--now`
that is not a finite number, an output path that cannot be written) is reported on stderr as one
line per problem, naming the file or option, the path to the field and why, and the exit status
is 2; output paths are checked before any work is done. No traceback reaches the user for bad
input. Output is always valid JSON (no NaN). A reader that stops early (`llmscaler decide ... |
head`) ends the command quietly. `llmscaler --version` prints the package version.
`simulate`, `tune`, `emulate` and `demo` need the `sim` extra (numpy, matplotlib, rich, and
aiohttp for the servers of `emulate` and `demo`); without it they say so in one line (`pip install
'llmscaler[sim]'`) and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmscaler import engine, io
from llmscaler.config import durations
from llmscaler.config import file as config_file
from llmscaler.config.errors import ConfigFileError
from llmscaler.config.resolved import Config
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.policies import registry
from llmscaler.version import version

EXIT_BAD_INPUT = 2
SIM_PACKAGES = ('numpy', 'matplotlib', 'rich')
"""What `simulate` needs of the `sim` extra, beyond the controller's packages."""
SERVER_PACKAGES = (*SIM_PACKAGES, 'aiohttp')
"""What `emulate` and `demo` need of the `sim` extra: the simulator's packages and the HTTP
server of the emulated pods and the development cluster."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='llmscaler',
        description='Cost-aware autoscaler for vLLM inference servers.',
    )
    parser.add_argument(
        '--version',
        action='version',
        version=f'llmscaler {version()}',
    )
    commands = parser.add_subparsers(dest='command', required=True)

    decide = commands.add_parser(
        'decide', help='run one decision cycle on a snapshot file and print the decisions'
    )
    decide.add_argument('--snapshot', required=True, type=Path, help='snapshot JSON file')
    decide.add_argument(
        '--config', type=Path, help='settings and ConfigMaps (YAML or JSON); defaults if absent'
    )
    decide.add_argument('--state', type=Path, help='state JSON from a previous run')
    # Read as text and checked in `_decide`: argparse's float() takes "nan" and "inf".
    decide.add_argument(
        '--now', help='current time in seconds, finite (default: the snapshot\'s "now")'
    )
    decide.add_argument('--state-out', type=Path, help='also write the new state to this file')

    commands.add_parser('schema', help='print the JSON Schema of the snapshot file')

    simulate = commands.add_parser(
        'simulate',
        help='replay a workload against a simulated vLLM fleet under several policies',
        description='Replay a workload (the built-in one, a scenario or a trace file) against a '
        'simulated vLLM fleet under each policy and report cost and SLO attainment side by side.',
    )
    simulate.add_argument('--scenario', type=Path, help='scenario YAML (variants, workload, ...)')
    simulate.add_argument('--trace', help='request trace: Azure CSV, generic CSV or JSONL')
    simulate.add_argument(
        '--trace-format', choices=('auto', 'azure', 'csv', 'jsonl'), help='trace format'
    )
    simulate.add_argument(
        '--policy',
        action='append',
        default=[],
        metavar='NAME',
        help=f'policy to run (repeatable): default, {", ".join(registry.names())}, keda-queue, '
        'hpa-kv, kaito-realtime[:FILE], kaito-cron:FILE|SCHEDULE=N[@ZONE];..., '
        'floor:SCHEDULE=VARIANT*N/DURATION[@ZONE];..., static:N, static:VARIANT=N,..., '
        'static-best, config:FILE, predictive:TARGET (an attainment target in (0.5, 1)), '
        'clairvoyant',
    )
    simulate.add_argument('--rate-scale', type=float, help='multiply the request rate')
    simulate.add_argument('--start', type=float, help='start of the trace window (s)')
    simulate.add_argument('--duration', type=float, help='length of the workload (s)')
    simulate.add_argument('--seed', type=int, help='random seed of the workload')
    simulate.add_argument(
        '--engine', choices=('fast', 'reference'), help='replica engine (default fast)'
    )
    simulate.add_argument(
        '--skip-bad-rows', action='store_true', help='skip malformed trace rows (counted)'
    )
    # Read as text and checked in `_simulate`: argparse's float() takes "nan" and "inf".
    simulate.add_argument(
        '--request-timeout',
        metavar='DURATION',
        help='clients abandon a request not completed this long after arrival: it fails '
        'wherever it is (seconds, or 90s, 2m, ...; default: never)',
    )
    simulate.add_argument(
        '--initial',
        metavar='VARIANT=N,...',
        help='replicas of each variant at the start (e.g. h100=3,l40s=0)',
    )
    simulate.add_argument(
        '--warm-start',
        action='store_true',
        help='start every policy at the fleet the first minutes need (docs/simulator.md)',
    )
    simulate.add_argument(
        '--prefix-caching',
        action='store_true',
        help="replicas keep vLLM's prefix cache (settings.prefix_caching; docs/simulator.md)",
    )
    simulate.add_argument(
        '--requests-csv',
        choices=('gz', 'plain', 'none'),
        default='gz',
        help='per-request CSV files: gzip-compressed (default), plain, or none',
    )
    simulate.add_argument('--out', type=Path, default=Path('out'), help='report directory')
    # Read as text and checked in `_simulate`: one line and exit status 2 for a bad value.
    simulate.add_argument(
        '--jobs',
        metavar='N',
        help='worker processes for the runs (default: one per core; 1: every run in this process)',
    )
    simulate.add_argument(
        '--ray',
        metavar='ADDRESS',
        nargs='?',
        const='',
        help='run the runs on the Ray cluster at ADDRESS (host:port, ray://host:port, auto; '
        "alone: $RAY_ADDRESS); needs the ray extra, pip install 'llmscaler[sim,ray]'",
    )
    simulate.add_argument(
        '--cache',
        action='store_true',
        help='reuse finished runs from the run cache and store new ones '
        '($LLMSCALER_RUN_CACHE, default ~/.cache/llmscaler/runs)',
    )
    simulate.add_argument(
        '--no-progress',
        action='store_true',
        help='no progress bar: one line per policy as it finishes',
    )

    _tune_parser(commands)

    emulate = commands.add_parser(
        'emulate',
        help='serve emulated vLLM pods (/metrics, /v1/completions) and an EPP metrics endpoint',
        add_help=False,
    )
    emulate.add_argument('arguments', nargs='*', help='see `llmscaler emulate --help`')
    run = commands.add_parser(
        'run', help='run the Kubernetes controller (see `llmscaler run --help`)', add_help=False
    )
    run.add_argument('arguments', nargs='*', help='see `llmscaler run --help`')
    demo = commands.add_parser(
        'demo',
        help='run the controller against a local cluster without Kubernetes (docs/demo.md)',
        add_help=False,
    )
    demo.add_argument('arguments', nargs='*', help='see `llmscaler demo --help`')
    manifests = commands.add_parser(
        'manifests',
        help='write KEDA ScaledObjects or HPAs for VariantAutoscalings (docs/manifests.md)',
        add_help=False,
    )
    manifests.add_argument('arguments', nargs='*', help='see `llmscaler manifests --help`')
    return parser


def _tune_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`llmscaler tune`'s options (docs/tune.md); numbers are read as text and checked in `_tune`
    (one line and exit status 2 for a bad value; argparse's float() takes "nan")."""
    tune = commands.add_parser(
        'tune',
        help="search a policy's settings for the cheapest that meet an SLO target",
        description='Simulate a workload under many settings of a policy (search '
        'part of the trace, several seeds), keep the cheapest that meets the attainment target, '
        'compare it with the defaults and the peers on the held-back part, and write the '
        'ConfigMap and VariantAutoscaling fields to apply with a report.',
    )
    tune.add_argument('--scenario', help='scenario YAML file, or a benchmark case name')
    tune.add_argument('--trace', help='request trace: Azure CSV, generic CSV or JSONL')
    tune.add_argument(
        '--trace-format', choices=('auto', 'azure', 'csv', 'jsonl'), help='trace format'
    )
    tune.add_argument('--rate-scale', type=float, help='multiply the request rate')
    tune.add_argument('--start', type=float, help='start of the trace window (s)')
    tune.add_argument('--duration', type=float, help='length of the workload (s)')
    tune.add_argument('--seed', type=int, help='first random seed of the workload')
    tune.add_argument(
        '--warm-start', action='store_true', help='every run starts at the fleet it first needs'
    )
    tune.add_argument(
        '--policy',
        action='append',
        default=[],
        metavar='NAME',
        help='peer to compare on the held-back part (repeatable; names as for simulate; '
        "default: the scenario's policies)",
    )
    tune.add_argument(
        '--tune-policy',
        metavar='NAME',
        help='the policy whose settings are searched: predictive (the default), '
        "saturation-percentage (WVA's default mode: its thresholds) or saturation-token "
        "(WVA's token mode: its thresholds)",
    )
    tune.add_argument('--ttft', metavar='DURATION', help='SLO: time to first token (e.g. 2s)')
    tune.add_argument('--itl', metavar='DURATION', help='SLO: mean inter-token latency (0.05)')
    tune.add_argument(
        '--target', metavar='FRACTION', help='attainment goal in (0.5, 1) (default 0.99)'
    )
    tune.add_argument('--budget', metavar='N', help='simulations the search may run (default 40)')
    tune.add_argument('--seeds', metavar='N', help='draws of the workload searched (default 2)')
    tune.add_argument(
        '--holdout', metavar='FRACTION', help='share of the trace held back, in (0, 1) (0.25)'
    )
    tune.add_argument('--out', type=Path, default=Path('out-tune'), help='output directory')
    tune.add_argument('--jobs', metavar='N', help='worker processes (default: one per core)')
    tune.add_argument('--cache', action='store_true', help='use the run cache (as simulate)')
    tune.add_argument('--no-progress', action='store_true', help='no progress bar')


def _bad(message: str) -> int:
    print(f'llmscaler: {message}', file=sys.stderr)
    return EXIT_BAD_INPUT


def _without_sim(command: str, *, packages: Sequence[str] = SIM_PACKAGES) -> int | None:
    """Exit status 2 and one line when one of `packages` (of the `sim` extra) is missing or
    `LLMSCALER_NATIVE` has a value the simulator's engine refuses, else None."""
    from llmscaler.sim.native import engine

    wrong = engine.problem()
    if wrong is not None:
        return _bad(wrong)
    try:
        for name in packages:
            importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or '').partition('.')[0] not in packages:
            raise
        print(
            f"llmscaler {command} needs the simulator's packages: pip install 'llmscaler[sim]'",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    return None


def _output_problem(path: Path, *, what: str, directory: bool) -> str:
    """Why `path` cannot be written as a `what`, or ''; checked before any work is done."""
    if directory:
        if path.exists() and not path.is_dir():
            return f'{what} {path}: exists and is not a directory'
        return ''
    if path.is_dir():
        return f'{what} {path}: is a directory'
    parent = path.parent
    if not parent.is_dir():
        return f'{what} {path}: directory {parent} does not exist'
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f'{what} {path}: not writable'
    return ''


def _simulate(args: argparse.Namespace) -> int:
    missing = _without_sim('simulate')
    if missing is not None:
        return missing
    # Imported here: the simulator pulls numpy and matplotlib, which `decide` does not need.
    from rich.console import Console

    from llmscaler.sim import simulate
    from llmscaler.sim.report import writer
    from llmscaler.sim.report.table import print_table
    from llmscaler.sim.scenario import document as scenario_document
    from llmscaler.sim.scenario import loader
    from llmscaler.sim.sweep import cache as run_cache
    from llmscaler.sim.sweep.executors import default_jobs, executor_for
    from llmscaler.sim.sweep.on_ray import RayUnavailable
    from llmscaler.sim.sweep.sweep import Sweep
    from llmscaler.sim.workload.formats import TraceError

    problem = _output_problem(args.out, what='--out', directory=True)
    if problem:
        return _bad(problem)
    jobs = default_jobs() if args.jobs is None else _count(args.jobs)
    if jobs is None:
        return _bad(f'--jobs: must be a whole number ≥ 1, got {args.jobs[:40]!r}')
    if args.ray is not None and args.jobs is not None:
        return _bad("--jobs and --ray: one or the other (on Ray, the cluster's CPUs are the jobs)")
    request_timeout = None
    if args.request_timeout is not None:
        request_timeout = _positive_duration(args.request_timeout)
        if request_timeout is None:
            return _bad(
                '--request-timeout: must be a positive, finite duration such as 60, 90s or 2m, '
                f'got {args.request_timeout[:40]!r}'
            )
    console = Console()
    try:
        document = (
            scenario_document.read_document(path=args.scenario)
            if args.scenario is not None
            else scenario_document.DEFAULT_DOCUMENT
        )
        document = scenario_document.with_overrides(
            document=document,
            trace_path=args.trace,
            trace_format=args.trace_format,
            policies=args.policy,
            rate_scale=args.rate_scale,
            start=args.start,
            duration=args.duration,
            seed=args.seed,
            engine=args.engine,
            skip_bad=args.skip_bad_rows,
            request_timeout=request_timeout,
            initial=args.initial,
            warm_start=args.warm_start,
            prefix_caching=args.prefix_caching,
        )
        where = str(args.scenario) if args.scenario is not None else 'scenario'
        setup = loader.from_document(document=document, where=where)
        store = run_cache.RunCache(directory=run_cache.default_directory()) if args.cache else None
        with Sweep(
            executor=executor_for(jobs=jobs, ray=args.ray),
            cache=store,
            progress=None if not args.no_progress else False,
            label='simulate',
        ) as sweep:
            outcome = simulate.run(
                setup=setup,
                out=args.out,
                console=console,
                progress=not args.no_progress,
                requests_csv=args.requests_csv,
                sweep=sweep,
            )
    except (scenario_document.ScenarioError, TraceError, RayUnavailable) as exc:
        print(f'llmscaler: {exc}', file=sys.stderr)
        return EXIT_BAD_INPUT
    skipped = outcome.workloads.skipped_rows if outcome.workloads is not None else 0
    if skipped:
        console.print(f'skipped {skipped} malformed trace rows')
    several = outcome.model_summaries is not None
    print_table(
        summaries=outcome.summaries,
        slo=outcome.slo,
        console=console,
        model_summaries=outcome.model_summaries,
        slos=outcome.slos if several else None,
    )
    for line in writer.remarks(results=outcome.results):
        console.print(line, markup=False)
    if outcome.report is not None:
        console.print(f'report: {outcome.report}')
    return 0


def _fraction(text: str | None, *, low: float, default: float) -> float | None:
    """A number in (`low`, 1) in `text` (`default` when absent), else None."""
    if text is None:
        return default
    value = _finite_seconds(text)
    return value if value is not None and low < value < 1 else None


def _tune(args: argparse.Namespace) -> int:
    missing = _without_sim('tune')
    if missing is not None:
        return missing
    # Imported here, as for simulate: the simulator pulls numpy, which `decide` does not need.
    from llmscaler.sim.scenario.document import ScenarioError
    from llmscaler.sim.sweep import cache as run_cache
    from llmscaler.sim.sweep.executors import default_jobs
    from llmscaler.sim.sweep.sweep import Sweep
    from llmscaler.sim.tune import inputs, report, run, tunables, tuned
    from llmscaler.sim.workload.formats import TraceError

    unwritable = _output_problem(args.out, what='--out', directory=True)
    if unwritable:
        return _bad(unwritable)
    counts: dict[str, int] = {}
    for flag, text, default in (
        ('--jobs', args.jobs, default_jobs()),
        ('--budget', args.budget, tuned.DEFAULT_BUDGET),
        ('--seeds', args.seeds, tuned.DEFAULT_SEEDS),
    ):
        count = default if text is None else _count(text)
        if count is None:
            return _bad(f'{flag}: must be a whole number ≥ 1, got {text[:40]!r}')
        counts[flag] = count
    goal = _fraction(args.target, low=0.5, default=tuned.DEFAULT_GOAL)
    if goal is None:
        return _bad(f'--target: must be a number in (0.5, 1), got {args.target[:40]!r}')
    holdout = _fraction(args.holdout, low=0.0, default=tuned.DEFAULT_HOLDOUT)
    if holdout is None:
        return _bad(f'--holdout: must be a number in (0, 1), got {args.holdout[:40]!r}')
    policy = tunables.by_name(tunables.DEFAULT if args.tune_policy is None else args.tune_policy)
    if policy is None:
        return _bad(
            f'--tune-policy: must be one of {", ".join(tunables.NAMES)}, '
            f'got {args.tune_policy[:40]!r}'
        )
    if (args.ttft is None) != (args.itl is None):
        return _bad('--ttft and --itl: give both or neither')
    slo: dict[str, float] = {}
    for flag, text in (('--ttft', args.ttft), ('--itl', args.itl)):
        if text is not None:
            seconds = _positive_duration(text)
            if seconds is None:
                return _bad(
                    f'{flag}: must be a positive, finite duration such as 2, 0.05 or 2s, '
                    f'got {text[:40]!r}'
                )
            slo[flag.removeprefix('--')] = seconds
    try:
        setup = inputs.load(
            scenario=args.scenario,
            overrides={
                'trace_path': args.trace,
                'trace_format': args.trace_format,
                'rate_scale': args.rate_scale,
                'start': args.start,
                'duration': args.duration,
                'seed': args.seed,
                'warm_start': args.warm_start,
            },
            peers=args.policy,
            slo=slo,
        )
        options = tuned.Options(
            goal=goal,
            budget=counts['--budget'],
            seeds=counts['--seeds'],
            holdout=holdout,
            policy=policy,
        )
        store = run_cache.RunCache(directory=run_cache.default_directory()) if args.cache else None
        with Sweep(
            jobs=counts['--jobs'],
            cache=store,
            progress=False if args.no_progress else None,
            label='tune',
        ) as sweep:
            found = run.tune(scenario=setup, options=options, sweep=sweep)
    except (ScenarioError, TraceError) as exc:
        return _bad(str(exc))
    try:
        written = run.write(tuned=found, out=args.out)
    except OSError as exc:
        return _bad(f'--out {args.out}: cannot write: {exc.strerror}')
    for line in report.summary_lines(tuned=found):
        print(line)
    print('wrote ' + ', '.join(str(path) for path in written))
    return 0


def _load_config(path: Path | None) -> tuple[Config, list[str]]:
    """The configuration and its fatal problems; warnings are printed and do not stop the run."""
    if path is None:
        return Config(), []
    config, errors = config_file.load_config_file(path=str(path))
    for warning in (e for e in errors if e.warning):
        print(f'llmscaler: warning: {warning}', file=sys.stderr)
    return config, [str(e) for e in errors if not e.warning]


def _finite_seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _count(text: str) -> int | None:
    """A whole number ≥ 1 in `text` (`--jobs`), else None."""
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if value >= 1 else None


def _positive_duration(text: str) -> float | None:
    """Seconds in `60`, `90s` or `1m30s` (Go style, `config.durations`); None unless > 0 and
    finite."""
    seconds = _finite_seconds(text)
    if seconds is None:
        try:
            seconds = durations.parse_duration(text)
        except ValueError:
            return None
    return seconds if 0 < seconds < math.inf else None


def _dumps(data: Any) -> str:
    # allow_nan=False: a NaN that slipped through would be invalid JSON; better to fail loudly.
    return json.dumps(data, indent=2, allow_nan=False)


def _decide(args: argparse.Namespace) -> int:
    now: float | None = None
    if args.now is not None:
        now = _finite_seconds(args.now)
        if now is None:
            return _bad(f'--now: must be a finite number of seconds, got {args.now[:40]!r}')
    if args.state_out is not None:
        problem = _output_problem(args.state_out, what='--state-out', directory=False)
        if problem:
            return _bad(problem)
    try:
        document = io.load_snapshot(path=args.snapshot)
        state = io.load_state(path=args.state) if args.state is not None else EMPTY_STATE
        config, problems = _load_config(args.config)
    except (io.InputError, ConfigFileError) as exc:
        return _bad(str(exc))
    if problems:
        for problem in problems:
            print(f'llmscaler: {problem}', file=sys.stderr)
        return EXIT_BAD_INPUT
    if now is None:
        now = document.effective_now
    outcome = engine.decide(snapshot=document.snapshot, config=config, state=state, now=now)
    result = io.dump_outcome(outcome=outcome, now=now)
    if args.state_out is not None:
        try:
            args.state_out.write_text(_dumps(result['state']) + '\n', encoding='utf-8')
        except OSError as exc:
            return _bad(f'--state-out {args.state_out}: cannot write: {exc.strerror}')
    _print(_dumps(result))
    return 0


def _print(text: str) -> None:
    print(text)
    # Flushed here, inside the caller's BrokenPipeError guard, not at interpreter exit.
    sys.stdout.flush()


def _reader_gone() -> None:
    """stdout's reader closed the pipe (`| head`): drop what is still buffered, quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `llmscaler` console script."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ['emulate']:
        missing = _without_sim('emulate', packages=SERVER_PACKAGES)
        if missing is not None:
            return missing
        # The emulator owns its options; argparse sub-commands cannot pass them through untouched.
        from llmscaler.emulate import server  # aiohttp: needed only by emulate and demo

        return server.main(arguments[1:])
    if arguments[:1] == ['run']:
        # The controller owns its options too (flags with environment equivalents).
        from llmscaler.controller import app

        return app.main(arguments[1:])
    if arguments[:1] == ['demo']:
        missing = _without_sim('demo', packages=SERVER_PACKAGES)
        if missing is not None:
            return missing
        # The demo owns its options; it runs the development cluster (the `sim` extra).
        from llmscaler.devcluster import demo

        return demo.main(arguments[1:])
    if arguments[:1] == ['manifests']:
        # Its own options, and one-line errors for them (docs/manifests.md).
        from llmscaler.manifests import command

        return command.main(arguments[1:])
    args = _parser().parse_args(arguments)
    try:
        if args.command == 'decide':
            return _decide(args)
        if args.command == 'simulate':
            return _simulate(args)
        if args.command == 'tune':
            return _tune(args)
        if args.command == 'schema':
            _print(_dumps(io.snapshot_schema()))
            return 0
    except BrokenPipeError:
        _reader_gone()
        return 0
    raise AssertionError(f'unhandled command {args.command}')  # argparse enforces the choices


if __name__ == '__main__':
    sys.exit(main())
