"""The stand-in's command lines: the real flag sets of an SGLang release, as argparse parsers.

`flags/<version>.json` is written by scripts/sglang_flags.py from the release's own wheel: every
option string of `launch_server` and `bench_serving`, its arity, type and choices, so that the
stand-in refuses exactly what that release refuses, in argparse's words. A version without a file
of its own uses the nearest release below it that has one (0.5.10 -> 0.5.9).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any

FLAGS = os.path.join(os.path.dirname(os.path.realpath(__file__)), "flags")  # no pathlib: a start
_TYPES: dict[str, Any] = {"int": int, "float": float}


def version_tuple(version: str) -> tuple[int, ...]:
    found = re.match(r"^\d+(\.\d+){0,2}", version.strip())
    return tuple(int(p) for p in found.group(0).split(".")) if found else (0,)


def kept_versions() -> list[str]:
    return sorted((name.removesuffix(".json") for name in os.listdir(FLAGS)
                   if name[:1].isdigit() and name.endswith(".json")), key=version_tuple)


def release_for(version: str) -> str:
    """The kept release whose flags `version` has: itself, else the nearest one below it."""
    kept = kept_versions()
    below = [v for v in kept if version_tuple(v) <= version_tuple(version)]
    return below[-1] if below else kept[0]


@functools.lru_cache(maxsize=8)
def flag_set(version: str) -> dict[str, Any]:
    with open(os.path.join(FLAGS, f"{release_for(version)}.json"), encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


class _DeprecatedAlias(argparse.Action):
    """SGLang's DeprecatedAliasStoreAction: stores the value under the new name and warns."""

    def __init__(self, option_strings: list[str], dest: str, new_flag: str | None = None,
                 **kwargs: Any) -> None:
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        instead = f" Use '{self.new_flag}' instead." if self.new_flag else ""
        sys.stdout.write(f"\033[33m'{option_string}' is deprecated and will be removed in a "
                         f"future release.{instead}\033[0m\n")
        setattr(namespace, self.dest, values)


def _add(parser: argparse.ArgumentParser, row: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {}
    if "d" in row:
        kwargs["dest"] = row["d"]
    if row.get("h"):
        kwargs["help"] = argparse.SUPPRESS
    kind = row.get("k", "")
    if "n" not in row:  # takes no value
        if kind == "BooleanOptionalAction":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["action"] = "store_true"
        parser.add_argument(*row["o"], **kwargs)
        return
    if row["n"] != 1:
        kwargs["nargs"] = row["n"]
    kwargs["type"] = _TYPES.get(row.get("t", ""), str)
    if row.get("c") is not None:
        kwargs["choices"] = row["c"]
    if row.get("r"):
        kwargs["required"] = True
    if kind == "DeprecatedAliasStoreAction":
        kwargs.update(action=_DeprecatedAlias, new_flag=row.get("new"))
    parser.add_argument(*row["o"], **kwargs)


def build_parser(version: str) -> argparse.ArgumentParser:
    """`launch_server`'s parser as SGLang `version` builds it (its prog included)."""
    data = flag_set(version)
    parser = argparse.ArgumentParser(prog=data["launch_server_prog"])
    for row in data["launch_server"]:
        _add(parser, row)
    return parser


def build_bench_parser(version: str) -> argparse.ArgumentParser:
    """`bench_serving`'s parser as SGLang `version` builds it: its prog is argparse's default,
    the file run (bench_serving.py, or serving.py for `python -m sglang.benchmark.serving`)."""
    data = flag_set(version)
    parser = argparse.ArgumentParser(description="Benchmark the online serving throughput.")
    for row in data["bench_serving"]:
        _add(parser, row)
    return parser
