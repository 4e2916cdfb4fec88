"""Hardware for the simulator: datasheets, presets, the step-time model and its validation."""
