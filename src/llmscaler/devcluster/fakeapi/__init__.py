"""A fake kube-apiserver over real HTTP on 127.0.0.1, for the demo, tests and benchmarks."""
