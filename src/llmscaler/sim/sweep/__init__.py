"""One parallel runner for every sweep of simulations (`sweep.Sweep`).

Why: a simulated run is a pure function of its workload, fleet, policy with its settings and
seed, so the many runs of a sweep (the bound's searches, `static-best`, every policy of
`llmscaler simulate`, the benchmarks' cases) can run anywhere and in any order. This package runs
them: `tasks` says what a task is (`RunSpec`, one simulation), `executors` where tasks run (in
this process, or on local worker processes; `on_ray`: on a Ray cluster), `cache` which
finished runs need not run again, `bar` the one progress bar of a sweep.
"""
