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
    """The Version of the first `sglang-*.dist-info` on sys.path, as importlib.metadata finds
    it, read directly: importing importlib.metadata and scanning every distribution cost each
    stand-in process 40 ms, a tenth of the suite's stand-in start-ups."""
    import sys

    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in names:
            if name.lower().startswith("sglang-") and name.endswith(".dist-info"):
                try:
                    with open(os.path.join(entry or ".", name, "METADATA"),
                              encoding="utf-8") as handle:
                        for line in handle:
                            if line.startswith("Version:"):
                                return line.split(":", 1)[1].strip()
                except OSError:
                    continue
    return None


__version__ = os.environ.get("STANDIN_VERSION") or _installed() or "0.5.2"
