"""`llmscaler demo`: the controller scaling a model on this machine, with no Kubernetes cluster.

Why: a new operator's first question is what the controller does, and answering it should not
need a cluster, GPUs or vLLM. The development cluster (`cluster.Cluster`) already plays the
apiserver, the Deployment controllers, the kubelet, emulated vLLM pods and a gateway with load for
the end-to-end tests; the demo runs the same pieces with a load that rises and falls, and the
real controller (`llmscaler run`) as a child process, and tells the user which `kubectl` commands
show it working.

What runs: the fake kube-apiserver on 127.0.0.1 (`--port`; 0 picks a free one) serving the
VariantAutoscaling kind with the printer columns of deploy/base/crds, and a kubeconfig for it in
the work directory; one model (`MODEL_8B`) with two variants of the same small replica, `cheap`
(cost 1) and `dear` (cost 5), each a Deployment, a VA (0 to 4 replicas) and emulated pods ready
`STARTUP_DELAY` seconds after they are created; the model's gateway and EPP; Prometheus when the
binary is installed and `--no-prometheus` is not given (otherwise the controller scrapes the
pods); scale to zero after a retention of `retention(duration)`, unless `--no-scale-to-zero`; and
`llmscaler run --kubeconfig <workdir>/controller.kubeconfig --interval 2s`, its log in the work
directory. `--policy` picks how the model is decided: `wva` (the default: WVA's saturation
analyzer, as a VA configured the WVA way is) or `predictive` (`llmscaler-predictive-config` in
the controller namespace, with the replica's performance parameters, the start-up delay and
`PREDICTIVE_SCALE_DOWN_DELAY`). The load over `--duration` (`PROFILE`): low, rising to
`HIGH_RATE` (scale-up), high, falling back to low (scale-down), none (scale to zero), then back
(scale from zero). A line is printed when a phase starts and when a Deployment's replicas
change.

When the control plane's binaries are built (`make binaries`), the API is the real one instead
(`controlplane.ControlPlane`: etcd, kube-apiserver with RBAC, kube-controller-manager and
kube-scheduler), the controller signs in as its ServiceAccount, and the kubeconfig printed is
the cluster admin's; `--control-plane` insists on it, `--fake-api` (or `--port`,
`--inference-pools`) keeps the fake.

Stopping: at the end of `--duration`, on SIGINT (Ctrl-C) or SIGTERM, the controller gets SIGTERM
(SIGKILL after 10 s), then Prometheus, the gateway and the emulators stop; the exit status is 0.
The work directory is a temporary one removed at exit unless `--workdir` names one.

What fails: an invalid option is one line on stderr and exit status 2 (a port in use too, and
`--control-plane` with `--port` or `--inference-pools`; with `--control-plane`, a binary not
built yet is one line and exit status 1); the
controller exiting by itself ends the demo with its last log lines and exit status 1, and so does
a missing deploy/base/crds (no source checkout), with one line naming where it looked.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import re
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from llmscaler.devcluster import binaries, objects
from llmscaler.devcluster.cluster import CONTROL_PLANE_BINARIES, Cluster
from llmscaler.devcluster.controlplane import ControlPlaneMissing
from llmscaler.devcluster.fakeapi import table
from llmscaler.devcluster.fakeapi.semantics import ApiError
from llmscaler.devcluster.kubelet import replicas_of
from llmscaler.devcluster.process import ControllerProcess, PrometheusMissing, prometheus_binary
from llmscaler.sim.hardware.presets import MODEL_8B, preset

NAMESPACE = 'llm'
CONTROLLER_NAMESPACE = 'llmscaler-system'
VARIANTS = (('cheap', 1.0), ('dear', 5.0))
# A small replica (4 sequences at a time), so that a few requests/s saturate it.
PRESET = 'llama-3.1-8b-l4'
MAX_NUM_SEQS = 4
MAX_REPLICAS = 4
STARTUP_DELAY = 5.0
LOW_RATE, HIGH_RATE, RETURN_RATE = 0.5, 8.0, 1.0
INTERVAL = '2s'
POLICIES = ('wva', 'predictive')
PREDICTIVE_SCALE_DOWN_DELAY = 30.0
"""Seconds: the demo's scale-down delay for `predictive` (a minute-long phase shows it held)."""
TARGET_TTFT_MS, TARGET_ITL_MS = 2000.0, 200.0
INPUT_TOKENS, OUTPUT_TOKENS = 64, 32
# Rates change in steps of this size on a ramp, so that the log shows a few steps, not hundreds.
RATE_STEP = 0.5
_TICK = 0.25
_MAX_DURATION = 24 * 3600.0
_DURATION = re.compile(r'(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<unit>[smh]?)')
_UNITS = {'': 1.0, 's': 1.0, 'm': 60.0, 'h': 3600.0}


@dataclass(frozen=True, slots=True)
class Phase:
    """From `start` (a fraction of the duration) on, the rate goes from `rate` to `to`."""

    start: float
    rate: float
    to: float
    what: str


PROFILE: tuple[Phase, ...] = (
    Phase(0.00, LOW_RATE, LOW_RATE, 'low load'),
    Phase(0.05, LOW_RATE, HIGH_RATE, 'load rising'),
    Phase(0.20, HIGH_RATE, HIGH_RATE, 'high load: scale-up'),
    Phase(0.35, HIGH_RATE, LOW_RATE, 'load falling'),
    # Long enough for the queue-length window (max over 1 min) to forget the high load.
    Phase(0.45, LOW_RATE, LOW_RATE, 'low load: scale-down'),
    Phase(0.70, 0.0, 0.0, 'no load: scale to zero after the retention'),
    Phase(0.87, RETURN_RATE, RETURN_RATE, 'load is back: scale from zero'),
)


@dataclass(frozen=True, slots=True)
class DemoOptions:
    duration: float
    port: int
    prometheus: bool
    scale_to_zero: bool
    workdir: Path | None
    inference_pools: bool = False
    control_plane: bool = False
    policy: str = 'wva'


def phase_at(*, fraction: float) -> Phase:
    """The phase of the load profile at `fraction` (0 to 1) of the duration."""
    return [p for p in PROFILE if p.start <= max(fraction, 0.0)][-1]


def rate_at(*, fraction: float) -> float:
    """Requests/s at `fraction` of the duration: linear within a phase, in RATE_STEP steps."""
    phase = phase_at(fraction=fraction)
    index = PROFILE.index(phase)
    end = PROFILE[index + 1].start if index + 1 < len(PROFILE) else 1.0
    within = min(max((fraction - phase.start) / (end - phase.start), 0.0), 1.0)
    rate = phase.rate + (phase.to - phase.rate) * within
    return round(rate / RATE_STEP) * RATE_STEP


def retention(duration: float) -> float:
    """Seconds without requests before a model goes to zero: well inside the no-load phase."""
    no_load = next(p for p in PROFILE if p.rate == p.to == 0.0)
    after = PROFILE[PROFILE.index(no_load) + 1]
    return max(2.0, round((after.start - no_load.start) * duration / 3))


def parse_duration(text: str) -> float:
    """`360`, `90s`, `6m`, `1.5h` → seconds; ValueError unless finite, > 0 and at most 24 h."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f'{text!r} is not a duration (e.g. 90s, 6m)')
    seconds = float(match['number']) * _UNITS[match['unit']]
    if not (math.isfinite(seconds) and 0 < seconds <= _MAX_DURATION):
        raise ValueError(f'{text!r} must be more than 0 and at most 24h')
    return seconds


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise ValueError(f'{text!r} is not a port (0-65535; 0 picks a free one)')
    return int(text)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f'llmscaler demo: {message}\n')


def parse_options(argv: Sequence[str]) -> DemoOptions:
    """The options; exits 2 with one line on stderr for an invalid one."""
    parser = _Parser(
        prog='llmscaler demo',
        allow_abbrev=False,
        description='The controller scaling a two-variant model on emulated vLLM pods, with a '
        'fake kube-apiserver: no cluster needed. Watch it with the kubectl commands it prints.',
    )
    parser.add_argument('--duration', default='6m', help='how long the load runs (default 6m)')
    parser.add_argument('--port', default='0', help='fake API port (default 0: a free port)')
    parser.add_argument(
        '--no-prometheus', action='store_true', help='the controller scrapes the pods directly'
    )
    parser.add_argument('--no-scale-to-zero', action='store_true', help='keep one replica')
    parser.add_argument(
        '--policy',
        choices=POLICIES,
        default='wva',
        help="how the model is decided: WVA's saturation analyzer (default) or predictive",
    )
    parser.add_argument(
        '--inference-pools',
        action='store_true',
        help="the model's EPP found through its InferencePool and EndpointSlice",
    )
    api = parser.add_mutually_exclusive_group()
    api.add_argument(
        '--control-plane',
        action='store_true',
        help='a real kube-apiserver, controller-manager and scheduler (built by `make '
        'binaries`); the default when they are built and neither --port nor --inference-pools '
        'is given',
    )
    api.add_argument('--fake-api', action='store_true', help='the fake API server, always')
    parser.add_argument(
        '--workdir', type=Path, help='kubeconfig and logs here, kept (default: temporary)'
    )
    args = parser.parse_args(argv)
    if args.control_plane and args.inference_pools:
        parser.error('--inference-pools: served by the fake API only, not with --control-plane')
    if args.control_plane and args.port != '0':
        parser.error("--port: the fake API's port; the control plane picks its own")
    try:
        duration = parse_duration(args.duration)
    except ValueError as exc:
        parser.error(f'--duration: {exc}')
    try:
        port = _port(args.port)
    except ValueError as exc:
        parser.error(f'--port: {exc}')
    if args.workdir is not None and not args.workdir.is_dir():
        parser.error(f'--workdir: {args.workdir} is not a directory')
    return DemoOptions(
        duration=duration,
        port=port,
        prometheus=not args.no_prometheus,
        scale_to_zero=not args.no_scale_to_zero,
        workdir=args.workdir,
        inference_pools=args.inference_pools,
        policy=args.policy,
        control_plane=args.control_plane
        or (
            not args.fake_api
            and not args.inference_pools
            and args.port == '0'
            and all(binaries.find(name) is not None for name in CONTROL_PLANE_BINARIES)
        ),
    )


def _say(text: str) -> None:
    print(text, flush=True)


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f'{minutes:2d}:{rest:02d}'


def scale_to_zero_configmap(*, retention_seconds: float) -> objects.Obj:
    """WVA's scale-to-zero ConfigMap, enabling it for every model with a short retention."""
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {
            'name': 'wva-model-scale-to-zero-config',
            'namespace': CONTROLLER_NAMESPACE,
            'labels': {'app.kubernetes.io/name': 'workload-variant-autoscaler'},
        },
        'data': {
            'default': f'enable_scale_to_zero: true\nretention_period: {retention_seconds:g}s'
        },
    }


def kubectl_commands(*, kubeconfig: Path) -> list[str]:
    """What to run in another terminal to watch the demo."""
    base = f'kubectl --kubeconfig {kubeconfig}'
    first = VARIANTS[0][0]
    return [
        f'{base} get va -w',
        f'{base} get va -o wide',
        f'{base} get deploy,pods',
        f'{base} describe va {first}',
        f'{base} get events.events.k8s.io --sort-by=.metadata.creationTimestamp '
        '-o custom-columns=TIME:.metadata.creationTimestamp,VA:.regarding.name,'
        'REASON:.reason,NOTE:.note',
    ]


async def _build(cluster: Cluster, options: DemoOptions) -> None:
    if options.scale_to_zero:
        cluster.seed(scale_to_zero_configmap(retention_seconds=retention(options.duration)))
    spec = preset(name=PRESET, max_num_seqs=MAX_NUM_SEQS)
    if options.policy == 'predictive':
        cluster.seed(
            objects.predictive_configmap(
                namespace=CONTROLLER_NAMESPACE,
                spec=spec,
                input_tokens=INPUT_TOKENS,
                output_tokens=OUTPUT_TOKENS,
                settings={
                    'startupSeconds': STARTUP_DELAY,
                    'scaleDownDelaySeconds': PREDICTIVE_SCALE_DOWN_DELAY,
                    'targetTTFT': TARGET_TTFT_MS,
                    'targetITL': TARGET_ITL_MS,
                },
            )
        )
    for name, cost in VARIANTS:
        await cluster.add_variant(
            name=name,
            model_id=MODEL_8B,
            preset=spec,
            cost=cost,
            replicas=1,
            min_replicas=0 if options.scale_to_zero else 1,
            max_replicas=MAX_REPLICAS,
            startup_delay=STARTUP_DELAY,
        )


def _replicas(cluster: Cluster) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for name, _ in VARIANTS:
        try:
            found[name] = replicas_of(cluster.deployment(name))
        except (ApiError, ValueError):
            found[name] = None
    return found


async def _drive(
    cluster: Cluster, controller: ControllerProcess, options: DemoOptions, stop: asyncio.Event
) -> int:
    """Run the load profile until its end or `stop`; 1 when the controller exits by itself."""
    started = time.monotonic()
    phase: Phase | None = None
    rate = -1.0
    seen = _replicas(cluster)
    while not stop.is_set():
        elapsed = time.monotonic() - started
        if elapsed >= options.duration:
            _say(f'{_clock(elapsed)}  the demo is over')
            return 0
        if controller.returncode is not None:
            _say(f'{_clock(elapsed)}  the controller exited ({controller.returncode}):')
            print(controller.log()[-3000:], file=sys.stderr, flush=True)
            return 1
        fraction = elapsed / options.duration
        if phase_at(fraction=fraction) != phase:
            phase = phase_at(fraction=fraction)
            _say(f'{_clock(elapsed)}  {phase.what}')
        if rate_at(fraction=fraction) != rate:
            rate = rate_at(fraction=fraction)
            cluster.set_rate(model_id=MODEL_8B, rate=rate)
        now = _replicas(cluster)
        for name in sorted(now):
            if now[name] != seen[name]:
                _say(
                    f'{_clock(elapsed)}  {name}: {seen[name]} → {now[name]} replicas '
                    f'(load {rate:g} req/s, queued {cluster.gateway(MODEL_8B).queue_size})'
                )
        seen = now
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=_TICK)
    _say(f'{_clock(time.monotonic() - started)}  stopping')
    return 0


def _banner(
    *,
    api: str,
    url: str,
    kubeconfig: Path,
    controller: ControllerProcess,
    metrics: str,
    policy: str,
) -> None:
    lines = [
        f'{api + ":":<21}{url}',
        f'kubeconfig:          {kubeconfig}',
        f'controller log:      {controller.log_path}',
        f'metrics:             {metrics}',
        f'policy:              {policy}',
        '',
        'In another terminal:',
        *(f'  {command}' for command in kubectl_commands(kubeconfig=kubeconfig)),
        '',
    ]
    _say('\n'.join(lines))


async def run(options: DemoOptions) -> int:
    """The demo (see the module docstring); the exit status."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        with contextlib.ExitStack() as stack:
            if options.workdir is not None:
                workdir = options.workdir.resolve()
            else:
                workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix='demo-')))
            return await _run_in(workdir, options, stop)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


async def _run_in(workdir: Path, options: DemoOptions, stop: asyncio.Event) -> int:
    metrics = 'Prometheus'
    use_prometheus = options.prometheus
    if use_prometheus:
        try:
            prometheus_binary()
        except PrometheusMissing as missing:
            use_prometheus = False
            metrics = f'the controller scrapes the pods directly ({missing})'
    else:
        metrics = 'the controller scrapes the pods directly (--no-prometheus)'
    cluster = Cluster(
        namespace=NAMESPACE,
        workdir=workdir,
        prometheus=use_prometheus,
        input_tokens=INPUT_TOKENS,
        output_tokens=OUTPUT_TOKENS,
        api_port=options.port,
        inference_pools=options.inference_pools,
        control_plane=options.control_plane,
    )
    async with cluster:
        await _build(cluster, options)
        if cluster.prometheus_url is not None:
            metrics = f'Prometheus at {cluster.prometheus_url}'
            source = ['--metrics-source', 'prometheus', '--prometheus-url', cluster.prometheus_url]
        else:
            source = ['--metrics-source', 'pods']
        controller = ControllerProcess(
            cluster=cluster,
            args=[
                '--namespace',
                CONTROLLER_NAMESPACE,
                '--interval',
                INTERVAL,
                '--metrics-bind-address',
                '127.0.0.1:0',
                '--health-probe-bind-address',
                '127.0.0.1:0',
                *source,
            ],
        )
        async with controller:
            if cluster.real:
                # The user's kubectl as the cluster admin: the controller's ServiceAccount may
                # not read Events, which `kubectl describe` shows.
                api = 'kube-apiserver'
                kubeconfig = cluster.control_plane.kubeconfig(
                    workdir / 'kubeconfig', namespace=NAMESPACE
                )
            else:
                api = 'fake kube-apiserver'
                kubeconfig = cluster.kubeconfig(workdir / 'kubeconfig')
            _banner(
                api=api,
                url=cluster.url,
                kubeconfig=kubeconfig,
                controller=controller,
                metrics=metrics,
                policy=options.policy,
            )
            return await _drive(cluster, controller, options, stop)


def port_free(port: int) -> bool:
    """Whether 127.0.0.1:`port` can be listened on now (0: always)."""
    with socket.socket() as sock:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(('127.0.0.1', port))
        except OSError:
            return False
    return True


def main(argv: Sequence[str]) -> int:
    """Entry point of `llmscaler demo`."""
    options = parse_options(argv)
    try:
        table.require_crds()
    except FileNotFoundError as exc:
        print(f'llmscaler demo: {exc}', file=sys.stderr)
        return 1
    if not port_free(options.port):
        print(f'llmscaler demo: --port: 127.0.0.1:{options.port} is in use', file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(options))
    except ControlPlaneMissing as exc:
        print(f'llmscaler demo: --control-plane: {exc}', file=sys.stderr)
        return 1
