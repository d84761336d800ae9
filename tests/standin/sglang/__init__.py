"""A stand-in for SGLang in tests: same command lines, realistic logs, no GPU.

`python -m sglang.launch_server` and `python -m sglang.bench_serving` accept a subset of the real
flags (read from SGLang's server_args.py and bench_serving.py) and behave as `STANDIN_MODE` says;
see `launch_server.py` for the modes and the environment variables.
"""

import os

__version__ = os.environ.get("STANDIN_VERSION") or "0.5.2"
