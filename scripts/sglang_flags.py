"""Read the real SGLang parsers out of downloaded wheels; write the stand-in's flag sets.

    pip download --no-deps --only-binary=:all: sglang==0.5.2 -d /tmp/sgl   # one per release
    python scripts/sglang_flags.py --wheels /tmp/sgl --python /tmp/probe-venv/bin/python

For each release it unzips the wheel into a scratch folder and runs, in a child interpreter,
`python -m sglang.launch_server --help` and `python -m sglang.bench_serving --help` as the real
entry points do. Third-party modules (torch, transformers, ...) are inert stubs; SGLang's own
modules run for real, and one that cannot run without a GPU stack becomes a stub in turn (no
torch, no GPU, no network). argparse itself is real: the parser is the release's own, caught
when it parses, so option strings, arities, choices and the help text are what that release
prints on a CUDA host. Choices that still come out of a stub are written as null (any value).

Written, compact and committed: tests/standin/sglang/flags/<version>.json (both parsers) and
tests/standin/sglang/flags/history.json (what each release of the whole range added, removed or
re-chose, the evidence for config/engines/sglang/flags.yaml), and with --help-fixture VERSION the
release's verbatim `launch_server --help` as tests/jobs/fixtures/sglang-VERSION-help.txt.
The probing interpreter must be Python 3.11 (the wheels from 0.5.11 on are cp311) with msgspec
and PyYAML installed (0.5.20's parser is built from msgspec structs); nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "standin" / "sglang" / "flags"
FIXTURES = ROOT / "tests" / "jobs" / "fixtures"
# Written as full flag sets: the releases the issue names, and those on either side of a change
# that config/engines/sglang/flags.yaml relies on. history.json covers every release read.
KEPT = ("0.5.2", "0.5.3", "0.5.8", "0.5.9", "0.5.14", "0.5.15", "0.5.19", "0.5.20", "0.5.23")
# Modules run for real: the entry points and what builds their parsers. Everything else is a stub.
REAL = (
    "sglang.launch_server", "sglang.bench_serving", "sglang.srt.server_args",
    "sglang.srt.arg_groups", "sglang.benchmark.serving", "sglang.version", "sglang._version",
)
KEEP_TOP = ("msgspec", "yaml", "_yaml")  # third-party modules the probe really imports
TOOLS = ("launch_server", "bench_serving")


# ------------------------------------------------------------------ the child: one release

_PROBE = r'''
import argparse, contextlib, importlib.abc, importlib.machinery, io, json, os, runpy, sys, types

ROOT, REAL, KEEP = sys.argv[1], sys.argv[2].split(","), set(sys.argv[3].split(","))
FAILED = {}


class StubMeta(type):
    """A stand-in for anything imported: callable, subscriptable, falsy, empty, a decorator."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _stub(cls.__stubname__ + "." + name)

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and type(args[0]) is not StubMeta:
            return args[0]
        return _stub(cls.__stubname__ + "()")

    def __getitem__(cls, key): return _stub(cls.__stubname__ + "[]")
    def __iter__(cls): return iter(())
    def __len__(cls): return 0
    def __bool__(cls): return False
    def __or__(cls, other): return cls
    def __ror__(cls, other): return cls
    def __add__(cls, other): return other
    def __radd__(cls, other): return other
    def __mul__(cls, other): return cls
    __rmul__ = __sub__ = __rsub__ = __truediv__ = __mul__
    def __lt__(cls, other): return False
    __le__ = __gt__ = __ge__ = __lt__
    def __int__(cls): return 0
    def __index__(cls): return 0
    def __float__(cls): return 0.0
    def __contains__(cls, item): return False
    def __enter__(cls): return cls
    def __exit__(cls, *exc): return False
    def __str__(cls): return "<stub " + cls.__stubname__ + ">"
    __repr__ = __str__
    def __hash__(cls): return id(cls)
    def __eq__(cls, other): return cls is other


def _stub(name):
    return StubMeta(name.rsplit(".", 1)[-1] or "stub", (), {"__stubname__": name})


# A CUDA host's torch has none of the other accelerators' namespaces (is_npu() tests hasattr).
ABSENT = {"torch": {"npu", "xpu", "musa", "hpu", "mlu"}}


class StubModule(types.ModuleType):
    __version__ = "0.0.0"

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") or name in ABSENT.get(self.__name__, ()):
            raise AttributeError(name)
        value = _stub(self.__name__ + "." + name)
        setattr(self, name, value)
        return value


class StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        module = StubModule(spec.name)
        module.__path__, module.__file__ = [], "<stub>"
        return module

    def exec_module(self, module):
        pass


class FolderLoader(importlib.abc.Loader):
    """A package whose __init__ is not run (it would import the world): just its folder."""

    def __init__(self, folder):
        self.folder = folder

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = [self.folder]
        return module

    def exec_module(self, module):
        pass


class TryLoader(importlib.abc.Loader):
    """Run the module's real code; if it fails without a GPU stack, it becomes a stub."""

    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        try:
            self.real.exec_module(module)
        except Exception as exc:
            FAILED[module.__name__] = f"{type(exc).__name__}: {exc}"[:300]
            keep = {k: module.__dict__[k] for k in ("__name__", "__spec__", "__loader__")}
            module.__dict__.clear()
            module.__dict__.update(keep)
            module.__class__ = StubModule
            module.__path__, module.__file__ = [], "<stub>"


def is_real(name):
    return any(name == p or name.startswith(p + ".") for p in REAL)


class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top in KEEP:
            return None
        if top == "sglang":
            if is_real(name):
                return importlib.machinery.PathFinder.find_spec(name, path)
            folder = os.path.join(ROOT, *name.split("."))
            if os.path.isdir(folder) and any(p.startswith(name + ".") for p in REAL):
                return importlib.machinery.ModuleSpec(name, FolderLoader(folder), is_package=True)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.origin and spec.origin.endswith(".py"):
                spec.loader = TryLoader(spec.loader)
                return spec
            if spec is not None and spec.submodule_search_locations:  # a namespace package
                return spec
        return importlib.machinery.ModuleSpec(name, StubLoader(), is_package=True)


sys.meta_path.insert(0, Finder())
sys.path.insert(0, ROOT)
caught = []
original = argparse.ArgumentParser.parse_args


def parse_args(self, args=None, namespace=None):
    caught.append(self)
    return original(self, args, namespace)


argparse.ArgumentParser.parse_args = parse_args


def dynamic(choices):
    if choices is None:
        return False
    values = list(choices)
    return not values or any(type(v) is StubMeta or "<stub " in str(v) for v in values)


def is_plain(value):
    """A default worth writing: a finite number or a non-empty string."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return False
    if isinstance(value, float) and (value != value or abs(value) == float("inf")):
        return False
    return value != ""


def action(a, defaults):
    row = {"o": list(a.option_strings)}
    if a.nargs != 0:
        row["n"] = a.nargs if a.nargs is not None else 1
    if a.choices is not None:
        values = [v if isinstance(v, (int, float)) else str(v) for v in a.choices]
        if isinstance(a.choices, (set, frozenset)):  # no order of its own: sort it
            values = sorted(values, key=str)
        row["c"] = None if dynamic(a.choices) else list(dict.fromkeys(values))
    typ = getattr(a.type, "__name__", None)
    if typ is not None and typ != "str":
        row["t"] = typ
    if a.required:
        row["r"] = 1
    if a.help == argparse.SUPPRESS:
        row["h"] = 1
    kind = type(a).__name__
    if kind not in ("_StoreAction", "_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction"):
        row["k"] = kind
    if getattr(a, "new_flag", None):
        row["new"] = a.new_flag
    long = next((o for o in a.option_strings if o.startswith("--")), None)
    if long is not None and a.dest != long[2:].replace("-", "_"):
        row["d"] = a.dest
    if defaults and a.nargs != 0 and is_plain(a.default):
        row["df"] = a.default
    return row


def probe(module, defaults=False):
    caught.clear()
    out, err = io.StringIO(), io.StringIO()
    sys.argv = [module, "--help"]
    code = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            code = exc.code
        except BaseException as exc:
            code = repr(exc)
    if not caught:
        return {"error": f"{module}: no parser ({code}): {err.getvalue()[-2000:]}"}
    parser = caught[-1]
    actions = [
        action(a, defaults) for a in parser._actions if a.option_strings and a.dest != "help"
    ]
    return {"prog": parser.prog, "help": out.getvalue(), "exit": code, "actions": actions}


os.environ.pop("COLUMNS", None)
result = {
    "launch_server": probe("sglang.launch_server"),
    "bench_serving": probe("sglang.bench_serving", defaults=True),
    "stubbed": FAILED,
}
sys.__stdout__.write(json.dumps(result))
'''


# ------------------------------------------------------------------ the parent: all releases


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:4])


def find_wheels(folder: Path) -> dict[str, Path]:
    """Release -> wheel file, for the `sglang-X.Y.Z-*.whl` (no .postN) files in `folder`."""
    found: dict[str, Path] = {}
    for wheel in sorted(folder.glob("sglang-*.whl")):
        version = wheel.name.split("-")[1]
        if re.fullmatch(r"\d+\.\d+\.\d+", version):
            found[version] = wheel
    return dict(sorted(found.items(), key=lambda item: _version_key(item[0])))


def probe_wheel(wheel: Path, *, python: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sglang-wheel-") as scratch:
        with zipfile.ZipFile(wheel) as archive:
            members = [
                n for n in archive.namelist() if n.startswith("sglang/") and n.endswith(".py")
            ]
            archive.extractall(scratch, members=members)
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "PYTHONPATH")}
        # 0.5.23's --sampling-backend choices are a set: a fixed hash seed keeps their order
        env.update(PYTHONHASHSEED="0", PYTHONNOUSERSITE="1")
        done = subprocess.run(
            [python, "-c", _PROBE, scratch, ",".join(REAL), ",".join(KEEP_TOP)],
            capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL,
        )
    if done.returncode != 0:
        raise SystemExit(f"{wheel.name}: the probe failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    for part in (result["launch_server"], result["bench_serving"]):
        if "error" in part:
            raise SystemExit(f"{wheel.name}: {part['error']}")
    return result


def option_map(actions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {option: row for row in actions for option in row["o"]}


def history(sets: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per release: the flags of each tool added, removed, hidden, deprecated or re-chosen."""
    out: dict[str, Any] = {}
    previous: dict[str, dict[str, dict[str, Any]]] | None = None
    for version, data in sets.items():
        now = {tool: option_map(data[tool]["actions"]) for tool in TOOLS}
        if previous is None:
            out[version] = {"base": True}
        else:
            entry: dict[str, Any] = {}
            for tool, flags in now.items():
                before = previous[tool]
                change: dict[str, Any] = {}
                added = sorted(set(flags) - set(before))
                removed = sorted(set(before) - set(flags))
                hidden = sorted(f for f in flags if f in before
                                and flags[f].get("h") and not before[f].get("h"))
                choices = {
                    f: {"added": sorted(set(new) - set(old), key=str),
                        "removed": sorted(set(old) - set(new), key=str)}
                    for f in flags if f in before
                    for new, old in [(flags[f].get("c") or [], before[f].get("c") or [])]
                    if flags[f].get("c") is not None and before[f].get("c") is not None
                    and set(new) != set(old)
                }
                deprecated = {
                    f: flags[f].get("new") for f in flags
                    if str(flags[f].get("k", "")).startswith("Deprecated")
                    and not str(before.get(f, {}).get("k", "")).startswith("Deprecated")
                }
                for key, value in (("added", added), ("removed", removed), ("hidden", hidden),
                                   ("deprecated", deprecated), ("choices", choices)):
                    if value:
                        change[key] = value
                if change:
                    entry[tool] = change
            out[version] = entry
        previous = now
    return out


def dump_compact(data: dict[str, Any]) -> str:
    """JSON with one flag (or one release) per line: small, and diffs read well."""
    lines = ["{"]
    items = list(data.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if isinstance(value, list) and value and isinstance(value[0], dict):
            rows = [json.dumps(row, separators=(",", ":")) for row in value]
            body = ",\n  ".join(rows)
            lines.append(f"{json.dumps(key)}: [\n  {body}\n]{comma}")
        elif isinstance(value, dict):
            inner = ",\n  ".join(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                                 for k, v in value.items())
            lines.append(f"{json.dumps(key)}: {{\n  {inner}\n}}{comma}")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_flag_set(version: str, data: dict[str, Any]) -> dict[str, Any]:
    launch, bench = data["launch_server"], data["bench_serving"]
    return {
        "version": version,
        "launch_server_prog": launch["prog"],
        "bench_serving_prog": bench["prog"],
        "launch_server": launch["actions"],
        "bench_serving": bench["actions"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, default=Path("/tmp/sgl"),
                        help="folder of downloaded sglang-X.Y.Z-*.whl files")
    parser.add_argument("--python", default=sys.executable,
                        help="Python 3.11 with msgspec and PyYAML, to run each release's parser")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--keep", nargs="*", default=list(KEPT),
                        help="releases written as full flag sets")
    parser.add_argument("--help-fixture", default=None, metavar="VERSION",
                        help="also write that release's launch_server --help (default: newest)")
    args = parser.parse_args(argv)
    wheels = find_wheels(args.wheels)
    if not wheels:
        raise SystemExit(f"no sglang-X.Y.Z-*.whl in {args.wheels}")
    missing = [v for v in args.keep if v not in wheels]
    if missing:
        raise SystemExit(f"no wheel for {', '.join(missing)} in {args.wheels}")
    sets: dict[str, dict[str, Any]] = {}
    for version, wheel in wheels.items():
        print(f"reading {wheel.name}", file=sys.stderr)
        sets[version] = probe_wheel(wheel, python=args.python)
    args.out.mkdir(parents=True, exist_ok=True)
    for version in args.keep:
        path = args.out / f"{version}.json"
        path.write_text(dump_compact(to_flag_set(version, sets[version])), encoding="utf-8")
    summary = {"releases": list(sets), "changes": history(sets)}
    (args.out / "history.json").write_text(dump_compact(summary), encoding="utf-8")
    newest = args.help_fixture or list(wheels)[-1]
    FIXTURES.mkdir(parents=True, exist_ok=True)
    fixture = FIXTURES / f"sglang-{newest}-help.txt"
    fixture.write_text(sets[newest]["launch_server"]["help"], encoding="utf-8")
    print(f"wrote {len(args.keep)} flag sets, history of {len(sets)} releases, {fixture.name}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
