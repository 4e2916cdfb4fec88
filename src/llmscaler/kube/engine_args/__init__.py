"""Engine parameters (vLLM or SGLang) read from the containers of a pod template."""
