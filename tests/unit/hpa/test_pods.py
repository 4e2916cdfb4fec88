"""Which pods the HPA counts (upstream's groupPods): ignored, unready, missing, ready, and the
CPU-only readiness rules with the 5 min initialization period and the 30 s readiness delay."""

from __future__ import annotations

from llmscaler.hpa.pods import Pod, PodMetric, group_pods

NOW = 10_000.0


def test_cpu_readiness_rules() -> None:
    metric = {'a': PodMetric(value=1, timestamp=NOW - 10, window=30)}
    # Within the initialization period, a sample taken less than a window after Ready is unready.
    fresh = Pod(name='a', start_time=NOW - 60, ready=True, ready_transition=NOW - 30)
    assert group_pods(pods=[fresh], metrics=metric, resource='cpu', now=NOW).unready == {'a'}
    settled = Pod(name='a', start_time=NOW - 60, ready=True, ready_transition=NOW - 50)
    assert group_pods(pods=[settled], metrics=metric, resource='cpu', now=NOW).ready_count == 1
    # Past the period, a pod that turned unready after having been ready counts as ready ...
    was_ready = Pod(name='a', start_time=NOW - 900, ready=False, ready_transition=NOW - 100)
    assert group_pods(pods=[was_ready], metrics=metric, resource='cpu', now=NOW).ready_count == 1
    # ... one that has never been ready (unready within 30 s of its start) does not.
    never = Pod(name='a', start_time=NOW - 900, ready=False, ready_transition=NOW - 890)
    assert group_pods(pods=[never], metrics=metric, resource='cpu', now=NOW).unready == {'a'}
    # No Ready condition, no start time: unready. Other metrics ignore readiness.
    assert group_pods(
        pods=[Pod(name='a', ready=None)], metrics=metric, resource='cpu', now=NOW
    ).unready
    assert group_pods(pods=[never], metrics=metric, resource='', now=NOW).ready_count == 1


def test_ignored_unready_and_missing() -> None:
    pods = [
        Pod(name='gone', deleting=True),
        Pod(name='failed', phase='Failed'),
        Pod(name='starting', phase='Pending', ready=False),
        Pod(name='silent'),
        # kubernetes#129866: a Succeeded pod is not ignored; without a sample it is missing.
        Pod(name='done', phase='Succeeded'),
        Pod(name='ok'),
    ]
    metrics = {name: PodMetric(value=1) for name in ('gone', 'failed', 'starting', 'ok')}
    groups = group_pods(pods=pods, metrics=metrics, resource='', now=NOW)
    assert groups.ignored == {'gone', 'failed'}
    assert groups.unready == {'starting'}
    assert groups.missing == {'silent', 'done'}
    assert groups.ready_count == 1
