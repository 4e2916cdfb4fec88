"""The simulator's event loop, its settings and its inputs."""
