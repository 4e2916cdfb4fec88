"""`llmscaler tune`: the cheapest settings of the recommended policy that meet an SLO target.

Why: the predictive policy's defaults are a guess for every workload at once; a user with a trace
can simulate it under many settings and keep the cheapest that still meets their attainment
target. One module per idea: `space` (the settings searched and what each candidate resolves
to), `split` (the trace's search part and held-back part), `problem` (a scenario turned into
simulations of candidates, every run through `sim.sweep`), `search` (successive halving under a
budget of simulations), `output` (the ConfigMap and VariantAutoscaling fields to apply),
`report` (report.md and front.json) and `run` (the command's whole course).
"""
