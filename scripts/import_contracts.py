"""import-linter's contracts, made from docs/architecture.md's tables (one truth: the doc says
what each folder may import, `pyproject.toml` holds the same as contracts, and
`tests/test_architecture.py` fails when they differ). Prints the TOML to paste into
pyproject.toml: `python scripts/import_contracts.py`.

The folders table: each row's module may import what its last column lists and nothing else of
ours (a `forbidden` contract of every other row's module; direct imports, those inside
functions too). The rooms table: `jobs/core`'s rooms as import-linter layers, highest first.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
_ROW = re.compile(r"^\| `(?P<path>[a-z_/.]+)` \| .* \| (?P<allowed>[^|]*) \|$")
_ROOMS = re.compile(r"^\| \d+ \| (?P<rooms>.*) \|$")


def module_of(path: str) -> str:
    """`jobs/core/` or `jobs/errors.py` as the dotted module `jobs.core`, `jobs.errors`."""
    return path.removesuffix("/").removesuffix(".py").replace("/", ".")


def folders(text: str) -> dict[str, list[str]]:
    """Each row's module and what it may import, in the doc's order."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if (match := _ROW.match(line)) is not None:
            found[module_of(match["path"])] = re.findall(r"`([a-z_.]+)`", match["allowed"])
    return found


def layers(text: str) -> list[str]:
    """The rooms table's layers, highest first, as import-linter writes them (`a | b`)."""
    found = []
    for line in text.splitlines():
        if (match := _ROOMS.match(line)) is not None:
            found.append(" | ".join(re.findall(r"`([a-z_]+)` \(", match["rooms"])))
    return found


def contracts(text: str) -> list[dict[str, object]]:
    table = folders(text)
    made: list[dict[str, object]] = []
    for module, allowed in table.items():
        forbidden = [m for m in table if m != module and m not in allowed]
        made.append({"name": f"{module} may import only what docs/architecture.md lists",
                     "type": "forbidden", "source_modules": [module],
                     "forbidden_modules": forbidden, "allow_indirect_imports": True})
    made.append({"name": "jobs.core's rooms are layers (docs/architecture.md)", "type": "layers",
                 "containers": ["jobs.core"], "layers": layers(text)})
    return made


def to_toml(made: list[dict[str, object]]) -> str:
    def value(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(f'"{x}"' for x in v) + "]"
        return f'"{v}"'
    blocks = ['[tool.importlinter]\nroot_packages = ["bot", "jobs"]']
    for contract in made:
        blocks.append("[[tool.importlinter.contracts]]\n" + "\n".join(
            f"{key} = {value(v)}" for key, v in contract.items()))
    return "\n\n".join(blocks) + "\n"


if __name__ == "__main__":
    sys.stdout.write(to_toml(contracts(DOC.read_text(encoding="utf-8"))))
