"""A stand-in for SGLang in tests: same command lines, realistic logs, no GPU.

`python -m sglang.launch_server` and `python -m sglang.bench_serving` take the flags of a real
release (flags/<version>.json, read from its wheel by scripts/sglang_flags.py) and behave as
`STANDIN_MODE` says; see `launch_server.py` for the modes and the environment variables. The
release is $STANDIN_VERSION, else the version of an `sglang` distribution installed around the
stand-in (a test's fake dist-info), else 0.5.2. A host's nightly environment (STANDIN_ENV_FILE,
`standin_host`) is laid over this process's first.
"""

import os

try:
    import standin_host
except ImportError:  # tests/standin is not on the path: no nightly environment
    standin_host = None  # type: ignore[assignment]
else:
    standin_host.apply_env_file()


def _installed() -> str | None:
    try:
        import importlib.metadata

        return importlib.metadata.version("sglang")
    except Exception:
        return None


__version__ = os.environ.get("STANDIN_VERSION") or _installed() or "0.5.2"
