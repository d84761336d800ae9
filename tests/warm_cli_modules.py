"""What the suite's warm interpreter imports before it forks a `specbench` process
(tests/warm_cli.py): every module of bot/ and jobs/, with what they import at their top
(SQLAlchemy, pydantic, Celery, Jinja2, Bolt...).

None of them reads the environment, starts a thread or seeds a generator at import: the env
and the working directory a process gets are read when its command runs, as in a fresh
interpreter. torch, numpy, matplotlib and Optuna stay out: they read the environment at import
(OMP_NUM_THREADS, MPLCONFIGDIR) and every process that needs one imports it itself.
`test_warm_cli` holds both.

Once imported, it prints where each top-level module it holds came from (MODULES_LINE, before
the fork server's READY): a child whose PYTHONPATH puts a folder first that holds another of
these names would have imported that one, so tests/warm_cli.py starts it cold.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys

import bot
import jobs
from tests.warm_cli import MODULES_LINE

NOT_PRELOADED = ("torch", "numpy", "matplotlib", "optuna", "transformers", "scipy", "ruptures")

for _package in (bot, jobs):
    for _found in pkgutil.walk_packages(_package.__path__, f"{_package.__name__}."):
        if not _found.name.endswith("__main__"):
            importlib.import_module(_found.name)


def _folder(module: object) -> str | None:
    """The sys.path folder a top-level module was found in (None: built in)."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    up = 2 if os.path.basename(file).startswith("__init__.") else 1
    for _ in range(up):
        file = os.path.dirname(file)
    return file


print(MODULES_LINE + json.dumps({name: _folder(module) for name, module in list(sys.modules.items())
                                 if "." not in name}), flush=True)
