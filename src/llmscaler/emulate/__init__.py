"""`llmscaler emulate`: vLLM pods and their inference gateway emulated over real HTTP.

The pods batch like vLLM (the simulator's replica model driven in real time) and expose vLLM's
and the EPP's real `/metrics` pages, so collectors, Prometheus and the controller can be tested
end to end without GPUs. `load` generates traffic, `fleet` advances the pods and the gateway to a
clock, `exposition` renders their pages, `http` maps requests onto them and `server` binds the
ports, ticks in real time and is the command line.
"""
