"""`make bench`: every figure the issues name, measured in one run, printed as a table.

Each `bench_*.py` module here exposes `run() -> dict[str, str]`. Timings are reported, never
asserted: CI does not fail on them.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback

import tests.bench as package


def main() -> int:
    modules = pkgutil.iter_modules(package.__path__)
    names = sorted(m.name for m in modules if m.name.startswith("bench_"))
    only = set(sys.argv[1:])
    failures = 0
    for name in names:
        if only and name not in only:
            continue
        began = time.monotonic()
        print(f"== {name}", flush=True)
        try:
            figures = importlib.import_module(f"tests.bench.{name}").run()
        except Exception:  # noqa: BLE001 - one broken bench must not hide the others
            failures += 1
            traceback.print_exc()
            continue
        width = max((len(k) for k in figures), default=0)
        for key, value in figures.items():
            print(f"   {key:<{width}}  {value}", flush=True)
        print(f"   ({time.monotonic() - began:.1f} s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
