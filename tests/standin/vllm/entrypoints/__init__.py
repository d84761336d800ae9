"""The stand-in's entry points (vllm.entrypoints in the real package)."""
