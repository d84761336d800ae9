"""Stand-in `python -m sglang.bench_serving`: the benchmark itself up to 0.5.14; from 0.5.15 a
deprecated import path for `sglang.benchmark.serving` that warns and then runs it.

0.5.15-0.5.23 sglang/bench_serving.py (one file, the same in each): `from
sglang.benchmark.serving import *`, then `warnings.warn(..., FutureWarning, stacklevel=1)` with
the words below, then `cli_main()`; Python prints the warning on stderr.
"""

import sys
import warnings

from sglang import __version__
from sglang._bench import main
from sglang._flags import version_tuple

if version_tuple(__version__) >= (0, 5, 15):
    warnings.warn(
        "`sglang.bench_serving` is deprecated and will be removed in a future "
        "release; use `sglang.benchmark.serving` instead "
        "(e.g. `python -m sglang.benchmark.serving`).",
        FutureWarning,
        stacklevel=1,
    )

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], module="sglang.bench_serving"))
