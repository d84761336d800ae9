"""`python -m vllm.entrypoints.cli.main`: the `vllm` command of the real package."""
