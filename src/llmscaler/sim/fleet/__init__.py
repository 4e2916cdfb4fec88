"""The simulated fleet: replicas and their lifecycle, gateways, GPUs, and the view a controller
has of it."""
