"""The stand-in's command line: vLLM's own parser, rebuilt from the release's flag set.

flags/<version>.json is written by scripts/vllm_flags.py from the release's real CLI: every
action of `serve` and `bench serve` in registration order with all its option strings, so that
argparse here refuses, abbreviates and reports ambiguity exactly as the release does. What the
release's FlexibleArgumentParser adds around argparse is ported from
vllm/utils/argparse_utils.py (0.33.0): `_` for `-` in flag names, `--help=all`, `--model` moved
to the positional tag, `-O3`, `--json-arg.key value`; its value parsers from
vllm/engine/arg_utils.py (optional_type, parse_type, union_dict_and_str, the dataclass parser
that refuses an unknown key in pydantic's words).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
from collections import defaultdict

from vllm._types import human_readable_int, value_type

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any, NoReturn

FLAGS = os.path.join(os.path.dirname(os.path.realpath(__file__)), "flags")  # no pathlib: a start


def _release(version: str) -> tuple[int, ...]:
    found = re.match(r"^\d+(\.\d+){0,2}", version.strip())
    return tuple(int(p) for p in found.group(0).split(".")) if found else (0,)


@functools.lru_cache(maxsize=4)
def flag_set(version: str) -> dict[str, Any]:
    """The kept flag set for `version`: its own, else the nearest kept release below it, else
    the oldest kept (0.33.0 and 0.34.0 are kept)."""
    kept = sorted((name.removesuffix(".json") for name in os.listdir(FLAGS)
                   if name[:1].isdigit() and name.endswith(".json")), key=_release)
    below = [v for v in kept if _release(v) <= _release(version)]
    with open(os.path.join(FLAGS, f"{below[-1] if below else kept[0]}.json"),
              encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def help_text(version: str, command: str) -> str:
    name = "serve-help" if command == "serve" else "bench-serve-help"
    with open(os.path.join(FLAGS, f"{flag_set(version)['version']}.{name}.txt"),
              encoding="utf-8") as handle:
        return handle.read()


class EnableDisable(argparse.Action):
    """vLLM's EnableDisableAction: --X / --no-X (and --enable-X / --disable-X) set one dest."""

    def __init__(self, option_strings: list[str], dest: str, negative: list[str] = (),  # type: ignore[assignment]
                 **kwargs: Any) -> None:
        self.negative = set(negative)
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, option_string not in self.negative)


class Shown:
    """A default the release holds as an object (EPLBConfig(...), set()): kept as its repr, and
    not a str, so that argparse does not run the flag's parser on it as on a string default."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


_STRINGY = ("str", "lower_underscore", "union_dict_and_str", "parse_reasoning_parser")


def _default(row: dict[str, Any]) -> Any:
    value = row.get("df")
    base = str(row.get("t") or "str").removeprefix("optional:")
    if isinstance(value, str) and ("n" not in row or base not in _STRINGY):
        return Shown(value)
    return value


def _add(parser: argparse.ArgumentParser, row: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"default": _default(row)}
    if "h" in row:
        kwargs["help"] = argparse.SUPPRESS
    if "o" not in row:  # the positional model tag
        parser.add_argument(row["d"], nargs=row["n"], type=str, **kwargs)
        return
    kwargs["dest"] = row["d"]
    if row["k"] == "EnableDisableAction":
        parser.add_argument(*row["o"], action=EnableDisable, negative=row.get("neg", []),
                            **kwargs)
        return
    if row["k"] == "_StoreTrueAction":
        parser.add_argument(*row["o"], action="store_true", **kwargs)
        return
    if row["k"] == "_AppendAction":
        kwargs["action"] = "append"
    if row.get("n", 1) != 1:
        kwargs["nargs"] = row["n"]
    kwargs["type"] = value_type(row.get("t"), row.get("keys"))
    for key, name in (("c", "choices"), ("const", "const")):
        if key in row:
            kwargs[name] = list(row[key]) if key == "c" else row[key]
    if row.get("r"):
        kwargs["required"] = True
    parser.add_argument(*row["o"], **kwargs)


class FlexibleArgumentParser(argparse.ArgumentParser):
    """The release's FlexibleArgumentParser: argparse with vLLM's spellings around it."""

    search_keyword: str | None = None
    help_command: str | None = None  # serve / bench serve: `--help` prints the release's text

    def error(self, message: str) -> NoReturn:
        if (self.prog.endswith(" serve") and message.startswith("unrecognized arguments:")
                and re.search(r"(^|\s)--task(=|\s|$)", message)):
            message += ("\n\nHint: --task is not a vllm serve option. For embedding, reranking, "
                        "or reward models, use --runner pooling. To adapt a generative model for "
                        "pooling, also use --convert embed, --convert classify, or --convert "
                        "reward.")
        super().error(message)

    def format_help(self) -> str:
        if self.help_command and FlexibleArgumentParser.search_keyword in (None, "all"):
            from vllm import __version__
            return help_text(__version__, self.help_command)
        return super().format_help()

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        return super().parse_args(preprocess(list(sys.argv[1:] if args is None else args)),
                                  namespace)


def _model_first(args: list[str]) -> list[str]:
    """`serve --model M ...` -> `serve M ...`, with the release's warning."""
    found = next((i for i, a in enumerate(args) if re.match(r"^--model(=.+|$)", a)), None)
    if found is None:
        return args
    from vllm._log import log
    log("WARNING", "argparse_utils.py", 330, "With `vllm serve`, you should provide the model as a "
        "positional argument or in a config file instead of via the `--model` option. The "
        "`--model` option will be removed in a future version.")
    if args[found] == "--model":
        return ["serve", args[found + 1], *args[1:found], *args[found + 2:]]
    return ["serve", args[found].removeprefix("--model="), *args[1:found], *args[found + 1:]]


def preprocess(args: list[str]) -> list[str]:
    """FlexibleArgumentParser.parse_args's rewriting of argv before argparse sees it."""
    if args[:1] == ["serve"]:
        args = _model_first(args)
        if (len(args) > 1 and args[1].startswith("-")
                and not any(re.match(r"^--config(=.+|$)", a) for a in args)
                and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", a) for a in args)):
            raise ValueError("`model` should be provided as the first positional argument when "
                             "using `vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.")
    pattern = re.compile(r"(?<=--)[^\.]*")
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg.startswith("--help="):
            FlexibleArgumentParser.search_keyword = arg.split("=", 1)[-1].lower()
            out.append("--help")
        elif arg.startswith("--"):
            key, eq, value = arg.partition("=")
            out.append(pattern.sub(lambda m: m.group(0).replace("_", "-"), key, count=1)
                       + eq + value)
        elif arg.startswith("-O") and arg != "-O":
            out += ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            out.append("--optimization-level")
        else:
            out.append(arg)
    return _dotted(out)


def _dotted(args: list[str]) -> list[str]:
    """`--json-arg.key value` (and `.key+ a,b`) merged into `--json-arg '{"key": value}'`."""
    merged: dict[str, dict[str, Any]] = defaultdict(dict)
    skip: set[int] = set()
    for i, arg in enumerate(args):
        if i in skip or not (arg.startswith("-") and "." in arg):
            continue
        name, eq, text = arg.partition("=")
        if eq and "." not in name:
            continue
        if not eq:
            if i + 1 >= len(args):
                continue
            text = args[i + 1]
            skip.add(i + 1)
        if name.endswith("+"):
            name, text = name[:-1], json.dumps(text.split(","))
        key, *path = name.split(".")
        try:
            value: Any = json.loads(text)
        except ValueError:
            try:
                value = human_readable_int(text)
            except (ValueError, argparse.ArgumentTypeError):
                value = text
        node = merged[key]
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
        skip.add(i)
    kept = [a for i, a in enumerate(args) if i not in skip]
    for key, value in merged.items():
        kept += [key, json.dumps(value)]
    return kept


def build_parser(version: str) -> FlexibleArgumentParser:
    """`vllm`'s top-level parser with its subcommands, `serve` and `bench serve` filled in."""
    data = flag_set(version)
    parser = FlexibleArgumentParser(description="vLLM CLI")
    parser.add_argument("-v", "--version", action="version", version=version)
    subs = parser.add_subparsers(required=False, dest="subparser")
    for name in data["commands"]:
        if name == "serve":
            serve = subs.add_parser("serve", usage=data["serve_usage"], help="Launch a local "
                                    "OpenAI-compatible API server to serve LLM completions via "
                                    "HTTP.")
            serve.help_command = "serve"
            for row in data["serve"]:
                _add(serve, row)
        elif name == "bench":
            bench = subs.add_parser("bench", usage="vllm bench <bench_type> [options]",
                                    help="vLLM bench subcommand.")
            kinds = bench.add_subparsers(required=True, dest="bench_type")
            for kind in data["bench_commands"]:
                sub = kinds.add_parser(kind, usage=f"vllm bench {kind} [options]")
                if kind == "serve":
                    sub.help_command = "bench serve"
                    for row in data["bench_serve"]:
                        _add(sub, row)
        else:
            subs.add_parser(name)
    return parser
