"""A stand-in for vLLM in tests: the release's command lines, routes and messages, no GPU.

`python -m vllm.entrypoints.cli.main serve MODEL ...` and `... bench serve ...` take the flags
of the real release (flags/<version>.json, read from its own parser by scripts/vllm_flags.py) and
behave as `STANDIN_MODE` says; see `_serve.py` for the modes and environment variables. The
release is $STANDIN_VERSION, else 0.33.0; 0.33.0 and 0.34.0 have flag sets of their own, any
other version the nearest kept one below it (the oldest for an older one).
"""

import os

__version__ = os.environ.get("STANDIN_VERSION") or "0.33.0"
