"""llmscaler's predictive policy: the cheapest variant mix that keeps the SLO over the start-up
horizon."""
