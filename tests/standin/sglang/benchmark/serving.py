"""Stand-in `python -m sglang.benchmark.serving`: the benchmark's home from 0.5.15 (the wheels of
0.5.15 through 0.5.23 have sglang/benchmark/serving.py; 0.5.14's has sglang/benchmark/ without
it, 0.5.9's no sglang/benchmark/ at all). On an older release Python finds no such module and
says so as it would, exit 1.
"""

import sys

from sglang import __version__
from sglang._flags import version_tuple

AT = version_tuple(__version__)

if __name__ == "__main__":
    if AT < (0, 5, 10):
        sys.stderr.write(f"{sys.executable}: Error while finding module specification for "
                         "'sglang.benchmark.serving' (ModuleNotFoundError: No module named "
                         "'sglang.benchmark')\n")
        sys.exit(1)
    if AT < (0, 5, 15):
        sys.stderr.write(f"{sys.executable}: No module named sglang.benchmark.serving\n")
        sys.exit(1)
    from sglang._bench import main

    sys.exit(main(sys.argv[1:], module="sglang.benchmark.serving"))
