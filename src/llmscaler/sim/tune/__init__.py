"""`llmscaler tune`: the cheapest settings of a policy that meet an SLO target.

Why: a policy's defaults are a guess for every workload at once; a user with a trace can simulate
it under many settings and keep the cheapest that still meets their attainment target. One module
per idea: `space` (what is searched for every policy: the candidates, the variants offered and
their replica bounds, and the interface a tunable policy implements), `predictive`, `saturation`
and `token` (the three tunable policies' settings and ConfigMaps), `tunables` (those by name),
`split` (the trace's search part and held-back part), `problem` (a scenario turned into simulations
of candidates, every run through `sim.sweep`), `search` (successive halving under a budget of
simulations), `output` (the ConfigMap and VariantAutoscaling objects to apply), `report` (report.md
and front.json) and `run` (the command's whole course).
"""
