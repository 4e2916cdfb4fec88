"""Published vLLM measurements the step-time model is fitted to and the simulator is checked on.

Why: every policy comparison stands on the replica model, and the replica model is only as good
as the published figures it reproduces. Each record is one figure with its setup, workload, load
and how it was read (sim/hardware/measurement.py defines the record; docs/fidelity-sources.md
describes every source and how far to trust it). Records are grouped by source; within a source they
are in the order the source prints them.

The figures "Llama-3.1-8B H100 ITL 12.3 ms at batch 128, 17.7 ms at 256", quoted as measured
when the step model was compared with vLLM, are not measurements at those batches: they are
WVA's two-point linear ITL fit (α 6.958 ms, β 0.042 ms/seq, the H100 preset's calibration)
evaluated there. They are kept, marked as fits, because the presets stand on them; a fitter
should weight them below printed measurements.

What fails: a malformed record raises ValueError at import (see sim/hardware/measurement.py);
`measurement` raises ValueError for an unknown key.
"""

from __future__ import annotations

from llmscaler.sim.hardware.datasheets import Precision
from llmscaler.sim.hardware.measurement import (
    UNIT_OF,
    Basis,
    Figure,
    Load,
    LoadKind,
    Measurement,
    Provenance,
    Setup,
    Source,
    Statistic,
    Workload,
)

_M8 = 'meta-llama/Llama-3.1-8B-Instruct'
_M70 = 'meta-llama/Llama-3.1-70B-Instruct'
_BF16, _FP8 = Precision.BF16, Precision.FP8


def _m(
    key: str,
    source: Source,
    setup: Setup,
    workload: Workload,
    load: Load,
    figure: Figure,
    statistic: Statistic,
    value: float,
    notes: str,
    *,
    provenance: Provenance = Provenance.PRINTED,
    uncertainty: float = 0.0,
) -> Measurement:
    return Measurement(
        key=key,
        source=source,
        setup=setup,
        workload=workload,
        load=load,
        figure=figure,
        statistic=statistic,
        value=value,
        unit=UNIT_OF[figure],
        provenance=provenance,
        uncertainty=uncertainty,
        notes=notes,
    )


_SHAREGPT_NOTE = (
    "input mean not published for this run: 215 is the mean of vLLM benchmark_serving's "
    '1000-prompt ShareGPT sample with the Llama 3 tokenizer (215,196 tokens, '
    'https://github.com/vllm-project/vllm/issues/7567), same length filter'
)

# SGLang's reproduction of vLLM 0.6.0 (multi-step scheduling on), ShareGPT, Poisson arrivals.
_SGL = Source(
    title='How to reproduce the benchmark results for SGLang v0.3.0 compared to vLLM v0.6.0',
    url='https://github.com/sgl-project/sglang/blob/main/benchmark/benchmark_vllm_060/README.md',
    date='2024-09',
    publisher='SGLang project (sgl-project/sglang benchmark/benchmark_vllm_060)',
)
_SGL_ENGINE = (
    'api_server --num-scheduler-steps 10 --max_model_len 4096; chunked prefill off (0.6.0 with '
    'multi-step); gpu_memory_utilization 0.9; prefix caching off (0.6.0 default)'
)
_SGL_8B = Setup(_M8, 'A100', 1, _BF16, _BF16, '0.6.0', _SGL_ENGINE)
_SGL_70B = Setup(_M70, 'H100', 4, _BF16, _BF16, '0.6.0', _SGL_ENGINE + '; --tensor 4')
_SGL_WL = Workload(
    name='ShareGPT (sglang.bench_serving sampling: prompt <= 1024, prompt + output <= 2048)',
    input_tokens=215.0,
    input_basis=Basis.ESTIMATED_MEAN,
    output_tokens=194.3,
    output_basis=Basis.DERIVED_MEAN,
    note='output mean = output tokens/s / requests/s of the offline runs (4132.37 / 21.27 = '
    '194.3; 3700.64 / 19.04 = 194.4); ' + _SHAREGPT_NOTE,
)
_SGL_ONLINE = (
    'median over the run ({n} prompts at {r} req/s, about 300 s); multi-step streams 10 tokens '
    'at a time, so the printed median ITL ({itl} ms) is the gap between chunks: TPOT is the '
    'per-token figure'
)
_SGL_OFFLINE = (
    '5000 prompts at rate inf; {rps} requests/s; SGLang notes vLLM reaches more with '
    'gpu_memory_utilization 0.95'
)


def _sgl_online(
    key: str, setup: Setup, rate: int, ttft: float, tpot: float, itl: float
) -> tuple[Measurement, Measurement]:
    note = _SGL_ONLINE.format(n=300 * rate, r=rate, itl=itl)
    load = Load(LoadKind.POISSON_RATE, rate)
    return (
        _m(f'{key}-ttft', _SGL, setup, _SGL_WL, load, Figure.TTFT, Statistic.MEDIAN, ttft, note),
        _m(f'{key}-tpot', _SGL, setup, _SGL_WL, load, Figure.TPOT, Statistic.MEDIAN, tpot, note),
    )


def _sgl_offline(key: str, setup: Setup, tokens_s: float, rps: float) -> Measurement:
    return _m(
        key,
        _SGL,
        setup,
        _SGL_WL,
        Load(LoadKind.ALL_AT_ONCE, 5000),
        Figure.OUTPUT_THROUGHPUT,
        Statistic.RUN,
        tokens_s,
        _SGL_OFFLINE.format(rps=rps),
    )


# Lambda's vLLM report: ShareGPT, every prompt at once (rate inf).
_LAMBDA = Source(
    title='LLMs inference benchmarks, using vLLM, on Lambda Cloud',
    url='https://github.com/LambdaLabsML/vllm-benchmark/blob/main/benchmark_v0.md',
    date='2024-09',
    publisher='Lambda (LambdaLabsML/vllm-benchmark)',
)
_LAMBDA_WL = Workload(
    name='ShareGPT V3 (vLLM benchmark_serving sampling)',
    input_tokens=215.0,
    input_basis=Basis.ESTIMATED_MEAN,
    output_tokens=178.8,
    output_basis=Basis.ESTIMATED_MEAN,
    note='not published for these runs: ' + _SHAREGPT_NOTE + '; output 178,793 tokens in the '
    "same sample (the vLLM v0.6.0 blog's 500-prompt sample: 202 in, 179 out)",
)
_LAMBDA_STEPS = (
    'multi-step --num-scheduler-steps 10, chunked prefill off, max-num-seqs 256, max-seq-len 2048'
)
_LAMBDA_GPU = (
    'The section does not name its GPU; H100 SXM is inferred: the report covers H100 and A100 '
    "and the 70B TP4 figure matches SGLang's 4 x H100 run within 5 %. "
)
_LAMBDA_320 = (
    'vLLM 0.5.4 defaults (max_num_seqs 256), 320 ShareGPT prompts at rate inf; the table prints '
    '"throughput/latency" and the report\'s metrics are output token throughput and '
    'inter-token latency, statistic not stated. Checkpoint {ckpt} (FP8 weights).'
)


def _lambda_320(
    key: str, model_id: str, tp: int, ckpt: str, tokens_s: float, itl: float
) -> tuple[Measurement, Measurement]:
    setup = Setup(model_id, 'H100', tp, _FP8, None, '0.5.4', 'defaults; 320 prompts at once')
    load = Load(LoadKind.ALL_AT_ONCE, 320)
    note = _LAMBDA_320.format(ckpt=ckpt)
    tput, lat = Figure.OUTPUT_THROUGHPUT, Figure.ITL
    return (
        _m(f'{key}-tput', _LAMBDA, setup, _LAMBDA_WL, load, tput, Statistic.RUN, tokens_s, note),
        _m(f'{key}-itl', _LAMBDA, setup, _LAMBDA_WL, load, lat, Statistic.UNSPECIFIED, itl, note),
    )


# vLLM's own v0.6.0 release post.
_VLLM_060 = Source(
    title='vLLM v0.6.0: 2.7x Throughput Improvement and 5x Latency Reduction',
    url='https://blog.vllm.ai/2024/09/05/perf-update.html',
    date='2024-09-05',
    publisher='vLLM team',
)

# WVA's measured two-point ITL fits (ITL = α + β·batch), the presets' calibration.
_WVA_DEMO = Source(
    title='workload-variant-autoscaler hack/samples/demo.md (H100 VariantAutoscaling sample)',
    url='https://github.com/llm-d-incubation/workload-variant-autoscaler/blob/f8bceeb/hack/'
    'samples/demo.md',
    date='2025-09',
    publisher='llm-d workload-variant-autoscaler',
)
_WVA_CHART = Source(
    title='workload-variant-autoscaler chart templates/variantautoscaling.yaml (L40S profile)',
    url='https://github.com/llm-d-incubation/workload-variant-autoscaler/blob/2201528/charts/'
    'workload-variant-autoscaler/templates/variantautoscaling.yaml',
    date='2025-10',
    publisher='llm-d workload-variant-autoscaler',
)
_WVA_WL = Workload(
    name='unstated (guidellm runs behind the fit are not published)',
    input_tokens=None,
    input_basis=Basis.UNSTATED,
    output_tokens=None,
    output_basis=Basis.UNSTATED,
    note="WVA's estimation procedure (docs/tutorials/parameter-estimation.md) runs guidellm "
    'synchronously (batch 1) and at --max-num-seqs, 128 input / 128 output tokens by default',
)
_WVA_NOTE = (
    'ITL = {a} + {b} x batch (ms), fitted by WVA from two guidellm runs (batch 1 and the max '
    'batch) and evaluated here at batch {n}; {where}. A fit, not a measurement at this batch: '
    'its error here is unknown. Model {ckpt}.'
)


def _wva(
    key: str, source: Source, gpu: str, alpha: float, beta: float, batch: int, where: str
) -> Measurement:
    setup = Setup(_M8, gpu, 1, _BF16, None, None, 'vLLM version not stated; ' + where)
    note = _WVA_NOTE.format(a=alpha, b=beta, n=batch, where=where, ckpt='unsloth/Meta-Llama-3.1-8B')
    value = round(alpha + beta * batch, 3)
    return _m(
        key,
        source,
        setup,
        _WVA_WL,
        Load(LoadKind.BATCH, batch),
        Figure.ITL,
        Statistic.FIT,
        value,
        note,
        provenance=Provenance.FIT,
    )


# Red Hat's MLPerf Inference v5.1 submission: vLLM 0.10.0, FP8 Llama-3.1-8B.
_REDHAT = Source(
    title='Efficient and reproducible LLM inference: Red Hat MLPerf Inference v5.1 results',
    url='https://www.redhat.com/en/blog/efficient-and-reproducible-llm-inference-red-hat-mlperf'
    '-inference-v51-results',
    date='2025-09',
    publisher='Red Hat',
)
_MLPERF_WL = Workload(
    name='CNN-DailyMail summarisation (MLPerf llama3.1-8b datacenter set, 13,368 samples)',
    input_tokens=None,
    input_basis=Basis.UNSTATED,
    output_tokens=128.0,
    output_basis=Basis.ESTIMATED_MEAN,
    note='max_tokens 128 and most outputs reach it (https://github.com/mlcommons/inference/issues'
    '/2256); article token lengths are not published in the sources read (prompts are '
    'tokenised with max_length 2048: mlcommons/inference language/llama3.1-8b/PREPROCESSING.md)',
)
_MLPERF_NOTE = (
    "MLPerf {scenario} result as stated in the post's summary (tokens/s = generated tokens); "
    'FP8 checkpoint, RHEL 9.6, single GPU. Input lengths unknown, see the workload note.'
)


def _mlperf(key: str, gpu: str, offline: float, server: float) -> tuple[Measurement, Measurement]:
    setup = Setup(_M8, gpu, 1, _FP8, None, '0.10.0', 'MLPerf Inference v5.1 submission')
    tput, run = Figure.OUTPUT_THROUGHPUT, Statistic.RUN
    off, srv = Load(LoadKind.ALL_AT_ONCE, 13368), Load(LoadKind.MLPERF_SERVER)
    return (
        _m(
            f'{key}-offline',
            _REDHAT,
            setup,
            _MLPERF_WL,
            off,
            tput,
            run,
            offline,
            _MLPERF_NOTE.format(scenario='Offline'),
        ),
        _m(
            f'{key}-server',
            _REDHAT,
            setup,
            _MLPERF_WL,
            srv,
            tput,
            run,
            server,
            _MLPERF_NOTE.format(scenario='Server'),
        ),
    )


# A concurrency sweep on one A100 40GB (a relative of the A100 80GB preset: 1.555 TB/s).
_MUSGRAVE = Source(
    title='vLLM throughput-latency sweep on NVIDIA A100',
    url='https://johnmusgrave.com/p/vllm-throughput-latency-sweep-on',
    date='2026',
    publisher='John Musgrave (blog; page undated, runs on vLLM 0.23.0)',
)
_MUSGRAVE_SETUP = Setup(_M8, 'A100-40GB', 1, _BF16, _BF16, '0.23.0', 'vllm serve defaults')
_MUSGRAVE_WL = Workload(
    name='random, fixed lengths (vllm bench serve --ignore-eos)',
    input_tokens=1024.0,
    input_basis=Basis.FIXED,
    output_tokens=128.0,
    output_basis=Basis.FIXED,
)


MEASUREMENTS: tuple[Measurement, ...] = (
    *_sgl_online('sglang060-8b-a100-rps4', _SGL_8B, 4, 100.48, 14.14, 129.32),
    *_sgl_online('sglang060-8b-a100-rps8', _SGL_8B, 8, 120.39, 17.09, 158.63),
    _sgl_offline('sglang060-8b-a100-offline', _SGL_8B, 4132.37, 21.27),
    *_sgl_online('sglang060-70b-h100tp4-rps4', _SGL_70B, 4, 179.15, 23.58, 231.23),
    *_sgl_online('sglang060-70b-h100tp4-rps8', _SGL_70B, 8, 207.12, 29.15, 275.32),
    _sgl_offline('sglang060-70b-h100tp4-offline', _SGL_70B, 3700.64, 19.04),
    _m(
        'lambda-v060-8b-h100-offline',
        _LAMBDA,
        Setup(_M8, 'H100', 1, _BF16, None, '0.6.0', _LAMBDA_STEPS),
        _LAMBDA_WL,
        Load(LoadKind.ALL_AT_ONCE, 5000),
        Figure.OUTPUT_THROUGHPUT,
        Statistic.RUN,
        8088.35,
        _LAMBDA_GPU + 'Table "Llama 3.1 8B: tp=1, rps=inf, num-prompt=5000", row v0.6.0 with 10 '
        'scheduler steps (median TPOT 25.57 ms); 1 step gave 3958.40 tok/s, v0.5.4 3032.04. BF16 '
        'read from the model name (the 405B row says FP8 explicitly, this one does not).',
    ),
    _m(
        'lambda-v060-70b-h100tp4-offline',
        _LAMBDA,
        Setup(_M70, 'H100', 4, _BF16, None, '0.6.0', _LAMBDA_STEPS),
        _LAMBDA_WL,
        Load(LoadKind.ALL_AT_ONCE, 5000),
        Figure.OUTPUT_THROUGHPUT,
        Statistic.RUN,
        3542.88,
        _LAMBDA_GPU + 'Table "Llama 3.1 70B: tp=4, rps=inf, num-prompt=5000", row v0.6.0 with '
        '10 scheduler steps (median TPOT 61.10 ms); 1 step gave 2291.0 tok/s, v0.5.4 1491.93.',
    ),
    *_lambda_320('lambda-v054-8b-fp8-h100', _M8, 1, 'Meta-Llama-3.1-8B-FP8', 3400.4, 19.75),
    *_lambda_320(
        'lambda-v054-70b-fp8-h100tp4', _M70, 4, 'Meta-Llama-3.1-70B-Instruct-FP8', 2242.99, 38.26
    ),
    *_lambda_320(
        'lambda-v054-70b-fp8-h100tp8', _M70, 8, 'Meta-Llama-3.1-70B-Instruct-FP8', 2572.8, 33.71
    ),
    _m(
        'vllm060-blog-8b-h100-light-itl',
        _VLLM_060,
        Setup('meta-llama/Meta-Llama-3-8B-Instruct', 'H100', 1, _BF16, _BF16, '0.5.x', 'defaults'),
        Workload('unstated (light load)', None, Basis.UNSTATED, None, Basis.UNSTATED),
        Load(LoadKind.SINGLE),
        Figure.ITL,
        Statistic.UNSPECIFIED,
        13.0,
        'Prose: "Llama3 8B can generate 1 token every 13 ms under light load", in the section '
        'profiling Llama 3 8B on 1 H100 before the 0.6.0 changes; rounded to the ms.',
        provenance=Provenance.STATED_APPROX,
        uncertainty=0.04,
    ),
    _wva('wva-fit-8b-h100-b1', _WVA_DEMO, 'H100', 6.958, 0.042, 1, 'maxBatchSize 512'),
    _wva('wva-fit-8b-h100-b128', _WVA_DEMO, 'H100', 6.958, 0.042, 128, 'maxBatchSize 512'),
    _wva('wva-fit-8b-h100-b256', _WVA_DEMO, 'H100', 6.958, 0.042, 256, 'maxBatchSize 512'),
    _wva('wva-fit-8b-l40s-b1', _WVA_CHART, 'L40S', 22.619, 0.181, 1, 'chart L40S profile'),
    _wva('wva-fit-8b-l40s-b128', _WVA_CHART, 'L40S', 22.619, 0.181, 128, 'chart L40S profile'),
    _wva('wva-fit-8b-l40s-b256', _WVA_CHART, 'L40S', 22.619, 0.181, 256, 'chart L40S profile'),
    *_mlperf('redhat-mlperf51-8b-fp8-h100', 'H100', 5777.0, 5103.0),
    *_mlperf('redhat-mlperf51-8b-fp8-l40s', 'L40S', 1642.0, 1207.0),
    _m(
        'musgrave-8b-a100-40gb-c1-tpot',
        _MUSGRAVE,
        _MUSGRAVE_SETUP,
        _MUSGRAVE_WL,
        Load(LoadKind.CONCURRENCY, 1),
        Figure.TPOT,
        Statistic.UNSPECIFIED,
        13.3,
        'Prose: "decode at one request per time runs at about 75 tokens/sec"; TPOT = 1000 / 75 '
        'ms. The rounding of "about 75" allows about 4 %.',
        provenance=Provenance.DERIVED,
        uncertainty=0.04,
    ),
    _m(
        'musgrave-8b-a100-40gb-c8-tput',
        _MUSGRAVE,
        _MUSGRAVE_SETUP,
        _MUSGRAVE_WL,
        Load(LoadKind.CONCURRENCY, 8),
        Figure.OUTPUT_THROUGHPUT,
        Statistic.RUN,
        495.0,
        'Prose: batching to concurrency 8 is "a 6.6x gain" in throughput over concurrency 1; '
        '6.6 x 75 tok/s. Throughput at concurrency 1 counts TTFT too, so it is a few % under '
        'the 75 tok/s decode rate: about 10 % either way.',
        provenance=Provenance.DERIVED,
        uncertainty=0.1,
    ),
)


def measurement(key: str) -> Measurement:
    """The record with `key`."""
    for m in MEASUREMENTS:
        if m.key == key:
            return m
    raise ValueError(f'unknown published measurement {key!r}')
