"""Read vLLM's own `serve` and `bench serve` parsers; write the stand-in's flag set and help texts.

How the committed data was made (vLLM 0.33.0, Python 3.11, no GPU):

    pip download --no-deps vllm==0.33.0 -d /tmp/vllm-wheel
    unzip -q /tmp/vllm-wheel/vllm-0.33.0-*.whl -d /tmp/vllm-src; python3 -m venv /tmp/vllm-venv
    /tmp/vllm-venv/bin/pip install torch==2.13.0            # the CPU build
    /tmp/vllm-venv/bin/pip install --no-deps /tmp/vllm-wheel/vllm-0.33.0-*.whl
    /tmp/vllm-venv/bin/pip install packaging regex cachetools psutil numpy pyyaml msgspec \
        pydantic cloudpickle requests tqdm huggingface_hub cbor2 pyzmq \
        'transformers>=5.16.1,<5.21.0' aiohttp oss-harmony openai pillow pybase64 uvloop \
        py-cpuinfo fastapi prometheus_client partial-json-parser uvicorn xgrammar llguidance \
        watchfiles orjson einops
    python scripts/vllm_flags.py --python /tmp/vllm-venv/bin/python --src /tmp/vllm-src

The probe runs the release's real CLI (`vllm.entrypoints.cli.main.main`, with
VLLM_TARGET_DEVICE=cpu, as the issue notes a GPU-less host needs) and catches the top-level
FlexibleArgumentParser when it is about to parse: every action of `serve` and `bench serve` in
registration order (so the stand-in's argparse gives the same ambiguity lists), each registered
option string (EnableDisableAction's hidden `--no-enable-x` included), nargs, choices, the value
parser (`int`, `optional:int`, `json`, `dataclass:CompilationConfig`, ...) and for a dataclass
the keys it accepts, and SpeculativeConfig's keys. `--help=all` of both is kept verbatim.

The stand-in also plays 0.34.0 (docs/contracts.md "Stacks": an upgrade check between two vLLM
stacks; 0.34.0 adds flags and drops SpeculativeConfig's disable_padded_drafter_batch and
use_heterogeneous_vocab). Made the same way with vllm==0.34.0 and torch==2.14.0 (its pin), with
`--stand-in-only`: the type table stays 0.33.0's.

Written: tests/standin/vllm/flags/<version>.json (compact), <version>.serve-help.txt,
<version>.bench-serve-help.txt, and config/engines/vllm/flag_types.yaml (the same flags as
jobs/engines/flag_types.py reads them, each with the file:line of the wheel's source that
declares it; --src names the unzipped wheel, for those lines).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "standin" / "vllm" / "flags"
TYPES = ROOT / "config" / "engines" / "vllm" / "flag_types.yaml"

_PROBE = r'''
import argparse, dataclasses, inspect, json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser

def type_kind(t):
    if t is None:
        return None
    if isinstance(t, type):
        return t.__name__
    name = getattr(t, "__name__", type(t).__name__)
    cells = dict(zip(t.__code__.co_freevars, [c.cell_contents for c in t.__closure__ or ()])) \
        if hasattr(t, "__code__") else {}
    if name == "_optional_type":
        return "optional:" + type_kind(cells["return_type"])
    if name == "_parse_type":
        inner = cells["return_type"]
        return "json" if getattr(inner, "__name__", "") == "loads" else "parse:" + type_kind(inner)
    if name == "parse_dataclass":
        return "dataclass:" + t.__defaults__[0].__name__
    if name == "loads":
        return "json"
    if name == "<lambda>":  # by what its source does: the stand-in rebuilds it
        text = inspect.getsource(t)
        if "lower()" in text:
            return "lower_underscore"
        return "device_ids" if "isdigit" in text else "comma_list"
    return name

def dataclass_keys(t):
    while t is not None and getattr(t, "__name__", "") in ("_optional_type", "_parse_type"):
        cells = dict(zip(t.__code__.co_freevars, [c.cell_contents for c in t.__closure__]))
        t = cells["return_type"]
    if getattr(t, "__name__", "") == "parse_dataclass":
        cls = t.__defaults__[0]
        return [f.name for f in dataclasses.fields(cls) if f.init]
    return None

def plain(value):
    try:
        return json.loads(json.dumps(value)) if value is not None else None
    except (TypeError, ValueError):
        return repr(value)

def dump(parser):
    groups = {id(a): g.title for g in parser._action_groups for a in g._group_actions}
    strings = {}
    for option, action in parser._option_string_actions.items():
        strings.setdefault(id(action), []).append(option)
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        row = {"d": action.dest, "k": type(action).__name__}
        if action.option_strings:
            row["o"] = strings[id(action)]
            row["shown"] = list(action.option_strings)
        if action.nargs != 0:
            row["n"] = 1 if action.nargs is None else action.nargs
        extra = {"t": type_kind(action.type), "keys": dataclass_keys(action.type),
                 "c": None if action.choices is None else [plain(c) for c in action.choices],
                 "r": 1 if action.required else None, "const": plain(action.const),
                 "df": None if action.default is argparse.SUPPRESS else plain(action.default),
                 "neg": sorted(getattr(action, "negative_option_strings", ())) or None,
                 "dep": 1 if action in getattr(parser, "_deprecated", ()) else None,
                 "h": 1 if action.help == argparse.SUPPRESS else None}
        row.update((k, v) for k, v in extra.items() if v is not None)
        row["g"] = groups.get(id(action))
        rows.append(row)
    return rows

def subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    raise SystemExit("no subcommands")

def catch(self, args=None, namespace=None):
    top = subparsers(self)
    from vllm.config.speculative import SpeculativeConfig
    import importlib.metadata, typing
    if WHAT == "bench":
        bench = subparsers(top.choices["bench"])
        out = {"bench_commands": list(bench.choices), "bench_serve_usage":
               bench.choices["serve"].usage, "bench_serve": dump(bench.choices["serve"])}
    else:
        keys = [f.name for f in dataclasses.fields(SpeculativeConfig) if f.init]
        hint = typing.get_type_hints(SpeculativeConfig)["method"]
        methods = [a for m in typing.get_args(hint) for a in (typing.get_args(m) or (m,))
                   if isinstance(a, str)]
        serve = top.choices["serve"]
        out = {
            "version": importlib.metadata.version("vllm"),
            "python": "%d.%d" % sys.version_info[:2],
            "prog": self.prog, "commands": list(top.choices),
            "serve_usage": serve.usage, "serve": dump(serve),
            "speculative_config_keys": keys, "speculative_methods": methods,
        }
    json.dump(out, sys.stdout)
    sys.exit(0)

WHAT = sys.argv[1]
FlexibleArgumentParser.parse_args = catch
sys.argv = ["main.py", *(["bench", "serve"] if WHAT == "bench" else ["serve"])]
from vllm.entrypoints.cli.main import main
main()
'''


# Set-valued choices are listed in hash order, and bench serve's --request-id-prefix defaults to
# a fresh uuid: a fixed hash seed and a fixed prefix keep the written files the same each run.
ENV = {"VLLM_TARGET_DEVICE": "cpu", "COLUMNS": "80", "PYTHONHASHSEED": "0"}
_UUID_PREFIX = re.compile(r"bench-[0-9a-f]{8}-")


def probe(python: str) -> dict:
    env = {**os.environ, **ENV}
    data: dict = {}
    for what in ("serve", "bench"):
        done = subprocess.run([python, "-c", _PROBE, what], capture_output=True, text=True,
                              env=env, check=True, cwd="/tmp")
        data.update(json.loads(_UUID_PREFIX.sub("bench-00000000-", done.stdout)))
    return data


def help_text(python: str, *command: str) -> str:
    env = {**os.environ, **ENV}
    done = subprocess.run([python, "-m", "vllm.entrypoints.cli.main", *command, "--help=all"],
                          capture_output=True, text=True, env=env, check=True, cwd="/tmp")
    return _UUID_PREFIX.sub("bench-00000000-", done.stdout)


# The value parsers of the release -> jobs/engines/flag_types.py's kinds. A parser of its own
# (a lambda that splits a list, the multimodal bucket parser) is `opaque`: any string.
KINDS = {
    "int": "int", "float": "float", "str": "str", "json": "json",
    "human_readable_int": "human_readable_int", "human_readable_int_or_auto": "opaque",
    "lower_underscore": "str", "union_dict_and_str": "opaque",
}
_PYTHONS = ("engine/arg_utils.py", "entrypoints/openai/cli_args.py", "benchmarks/serve.py")


def kind_of(row: dict[str, Any]) -> str:
    if "n" not in row:
        return "switch"
    base = str(row.get("t") or "str").removeprefix("optional:")
    if base.startswith("dataclass:"):
        return "json"
    return KINDS.get(base, "opaque")


def declared_at(src: Path | None, row: dict[str, Any], *, bench: bool = False) -> str:
    """`vllm/FILE:LINE` declaring the flag: its `"--flag"` literal, else its config field."""
    if src is None:
        return ""
    flag = next(o for o in row["o"] if o.startswith("--"))
    top = src / "vllm"
    files = [top / p for p in _PYTHONS] + sorted(top.rglob("*.py"))
    if bench:  # bench serve's parser: benchmarks/ and its datasets first
        files = [top / "benchmarks" / "serve.py", top / "benchmarks" / "datasets" / "datasets.py",
                 *sorted(top.glob("benchmarks/**/*.py")), *files]
    literal = f'"{flag}"'
    field = re.compile(r"^    " + re.escape(row["d"]) + r"\s*:")
    for pattern in (literal, field):
        for path in files:
            if not path.is_file():
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if (pattern in line) if isinstance(pattern, str) else pattern.match(line):
                    return f"{path.relative_to(src)}:{n}"
    return ""


def entry(row: dict[str, Any], src: Path | None, bench: bool) -> tuple[str, str]:
    longs = [o for o in row["o"] if o.startswith("--")]
    negated = set(row.get("neg") or ())
    mapping = str(row.get("t", "")).endswith(("json", "union_dict_and_str")) or "keys" in row
    item: dict[str, Any] = {
        "type": kind_of(row), "aliases": [o[2:] for o in longs[1:] if o not in negated] or None,
        "negated": sorted(o[2:] for o in negated) or None,
        "short": [o for o in row["o"] if not o.startswith("--")] or None,
        "nargs": row["n"] if row.get("n") in ("?", "+", "*") else None, "choices": row.get("c"),
        "mapping": True if mapping else None,
        "config": str(row["t"]).rsplit(":", 1)[-1] if "keys" in row else None,
        "deprecated": True if row.get("dep") else None,
        "source": declared_at(src, row, bench=bench) or None,
    }
    body = ", ".join(f"{k}: {_flow(v)}" for k, v in item.items() if v is not None)
    return longs[0][2:], f"  {longs[0][2:]}: {{{body}}}"


def _flow(value: Any) -> str:
    """A YAML flow value: lists inline, strings quoted when YAML would misread them."""
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    text = str(value)
    if re.fullmatch(r"[A-Za-z_][\w./-]*", text) and text.lower() not in (
            "null", "true", "false", "yes", "no", "on", "off", "y", "n"):
        return text
    return "'" + text.replace("'", "''") + "'"


def render(data: dict[str, Any], src: Path | None = None) -> str:
    """config/engines/vllm/flag_types.yaml: the shape of config/sglang_flag_types.yaml."""
    version = data["version"]
    lines = [
        f"# vLLM {version} `serve` flags and the values they take, read from the release's own",
        "# parser by scripts/vllm_flags.py (do not edit by hand: run it again).",
        "#",
        "# type: int | float | human_readable_int | json | str | opaque (the release's own parser:",
        "#   any string) | switch (no value). nargs: '?', '+' or '*'. choices: what the release",
        "#   takes (null: the string None). aliases: other long spellings; negated: those that set",
        "#   it false (--no-X, and --enable-X/--disable-X pairs); short: -tp and the like.",
        "# mapping: takes a JSON mapping (config: the dataclass that checks its keys). source:",
        "#   where the release declares it. Any unambiguous prefix of a long flag is taken, `_`",
        "#   for `-`, and `--X.key value` for one key of a mapping. bench: `vllm bench serve`'s.",
        "# speculative_config_keys: what --speculative-config takes (SpeculativeConfig's fields);",
        "#   another key fails the start with pydantic's 'Unexpected keyword argument' naming it.",
        f"releases: [{version}]",
        "abbreviations: true",
        "flags:",
    ]
    for section, rows in (("flags", data["serve"]), ("bench", data["bench_serve"])):
        if section == "bench":
            lines.append("bench:")
        entries = sorted(entry(r, src, section == "bench") for r in rows if r.get("o"))
        lines += [text for _, text in entries]
    lines.append("speculative_config_keys: " + _flow(data["speculative_config_keys"]))
    lines.append("speculative_methods: " + _flow(data["speculative_methods"]))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", required=True, help="the probe venv's interpreter")
    parser.add_argument("--src", type=Path, help="the unzipped wheel (for source lines)")
    parser.add_argument("--from-json", type=Path, help="skip the probe: render this flag set")
    parser.add_argument("--stand-in-only", action="store_true",
                        help="write the stand-in's files only, not the type table (a release "
                             "the stand-in plays beside the one the type table is read from)")
    args = parser.parse_args(argv)
    data = json.loads(args.from_json.read_text()) if args.from_json else probe(args.python)
    version = data["version"]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{version}.json").write_text(json.dumps(data, separators=(",", ":")) + "\n")
    if not args.from_json:
        (OUT / f"{version}.serve-help.txt").write_text(help_text(args.python, "serve"))
        (OUT / f"{version}.bench-serve-help.txt").write_text(
            help_text(args.python, "bench", "serve"))
    if args.stand_in_only:
        print(f"wrote {OUT}/{version}.*")
        return 0
    TYPES.parent.mkdir(parents=True, exist_ok=True)
    TYPES.write_text(render(data, args.src))
    print(f"wrote {OUT}/{version}.*, {TYPES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
