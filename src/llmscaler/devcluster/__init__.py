"""A Kubernetes-free cluster for the demo, the tests and the benchmarks.

Why: the controller is a Kubernetes controller, and trying it, testing it end to end and
measuring it all need an apiserver, the controllers that turn Deployments into pods, vLLM pods
and a gateway sending them load. None of that is needed to run `llmscaler run` in a real cluster,
so it lives here, beside the product but outside it: nothing in the controller imports this
package, and the decision core never may (import-linter).

What: `fakeapi` (a kube-apiserver over real HTTP on 127.0.0.1), `objects` (the Kubernetes objects
as the real controllers write them), `kubelet` (a Deployment brought to life with emulated vLLM
replicas), `gateway` (a model's load and routing), `cluster` (all of it together), `process`
(the controller and Prometheus as child processes) and `slowhttp` (a metrics server that drips
or never ends its answers). `llmscaler demo` runs them.
"""
