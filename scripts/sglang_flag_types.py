"""Read each SGLang release's launch_server parser out of its wheel; write the flags' value types.

    pip download --no-deps --only-binary=:all: sglang==0.5.23 -d /tmp/sgl   # one per release
    python scripts/sglang_flag_types.py --wheels /tmp/sgl --python /tmp/probe-venv/bin/python

The parser is the release's own, run by scripts/sglang_flags.py's probe (real argparse, stubbed
GPU stack): for every option its `type=` (int, float, SGLang's human_readable_int, json.loads,
...), its choices and whether it takes a value at all (store_true and friends). The evidence is
the line that declares the flag in the release's source: the `"--flag"` literal up to 0.5.19,
the msgspec field in srt/arg_groups/fields/ from 0.5.20 on.

Written: config/engines/sglang/flag_types.yaml, one flag a line,
loaded by jobs/engines/flag_types.py
so that a value of the wrong type is refused before a batch is stored (on the bot's host too,
which has no SGLang). Each flag's type is the one of the newest release that declares it with a
plain action (a deprecated alias takes its new flag's type, and the worker renames it); its
choices are those of every such release together (a value that only some releases take, like
`--moe-a2a-backend flashinfer`, is config/engines/sglang/flags.yaml's and the worker's business).
`sglang.bench_serving`'s flags (a preset's `bench`) are written the same way, under `bench:`.
tests/jobs/engines/test_flag_types.py checks the table against tests/standin/sglang/flags/.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sglang_flags  # noqa: E402  (the probe and the release list live there)

OUT = ROOT / "config" / "engines" / "sglang" / "flag_types.yaml"
# argparse type names -> the kinds jobs/engines/flag_types.py checks. Any other parser function
# (parse_cuda_graph_config_arg, ...) is written as `opaque`: any string, the release decides.
KINDS = {
    None: "str", "str": "str", "nullable_str": "str", "int": "int", "float": "float",
    "human_readable_int": "human_readable_int", "loads": "json", "json_list_type": "json",
}
PLAIN = (None, "BooleanOptionalAction")  # actions whose type is the flag's own


def kind_of(row: dict[str, Any]) -> str:
    if "n" not in row:  # nargs 0: store_true / store_false / store_const / BooleanOptional
        return "switch"
    return KINDS.get(row.get("t"), "opaque")


def read_sources(scratch: Path) -> list[tuple[str, list[str]]]:
    """(path under sglang/, lines) of a release's srt/ sources, the parser's own files first."""
    top = scratch / "sglang"
    srt = top / "srt"
    first = [srt / "server_args.py", *sorted(srt.glob("arg_groups/fields/*.py")),
             top / "bench_serving.py", top / "benchmark" / "serving.py",
             *sorted(top.glob("benchmark/serving/*.py"))]
    ordered = [p for p in first if p.is_file()]
    ordered += sorted(p for p in top.rglob("*.py") if p not in ordered)
    return [(str(p.relative_to(scratch / "sglang")), p.read_text(encoding="utf-8").splitlines())
            for p in ordered]


def declared_at(
    sources: list[tuple[str, list[str]]], flag: str, *, bench: bool = False
) -> str | None:
    """`srt/file.py:LINE` where the release declares `--flag`: its msgspec field (0.5.20 on),
    else its `"--flag"` literal in server_args.py, else its annotated field there (`name: A[`,
    a parser built from the fields, 0.5.15), else the first mention anywhere."""
    literal = re.compile(r"""["']""" + re.escape(flag) + r"""["']""")
    field = re.compile(r"^\s+" + re.escape(flag[2:].replace("-", "_")) + r"\s*:")
    annotated = re.compile(r"^\s+" + re.escape(flag[2:].replace("-", "_")) + r"\s*:\s*A\[")
    if bench:  # bench_serving's parser: its module (0.5.2) or its package (later)
        for path, lines in sources:
            if path == "bench_serving.py" or path.startswith("benchmark/"):
                for n, line in enumerate(lines, 1):
                    if literal.search(line):
                        return f"{path}:{n}"
        return None
    tries = [
        (field, lambda path: "/arg_groups/fields/" in path),
        (literal, lambda path: path == "srt/server_args.py"),
        (annotated, lambda path: path == "srt/server_args.py"),
        (literal, lambda path: True),
    ]
    for pattern, where in tries:
        for path, lines in sources:
            if not where(path):
                continue
            for n, line in enumerate(lines, 1):
                if pattern.search(line):
                    return f"{path}:{n}"
    return None


def merge(releases: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Primary flag -> {kind, nargs, choices, aliases, first, last, typed_in} over the releases."""
    out: dict[str, dict[str, Any]] = {}
    primary: dict[str, str] = {}  # every long option -> the flag it is an alias of
    for version, actions in releases.items():
        for row in actions:
            longs = [o for o in row["o"] if o.startswith("--")]
            if not longs or row.get("h"):
                continue
            key = next((primary[o] for o in longs if o in primary), longs[0])
            entry = out.setdefault(key, {"aliases": set(), "first": version, "rows": []})
            entry["aliases"].update(o for o in longs if o != key)
            primary.update((o, key) for o in longs)
            entry["last"] = version
            entry["rows"].append((version, row))
    for entry in out.values():
        plain = [(v, r) for v, r in entry["rows"] if r.get("k") in PLAIN] or entry["rows"]
        version, newest = plain[-1]
        entry["typed_in"] = version
        entry["kind"] = kind_of(newest)
        entry["nargs"] = newest.get("n")
        choice_sets = [r.get("c", "absent") for _, r in plain]
        if all(isinstance(c, list) for c in choice_sets):
            entry["choices"] = list(dict.fromkeys(x for c in choice_sets for x in c))
    return out


def render(
    merged: dict[str, dict[str, Any]],
    releases: list[str],
    evidence: dict[str, str],
    bench: dict[str, dict[str, Any]] | None = None,
) -> str:
    import yaml

    lines = [
        "# SGLang launch_server flags and the values they take, read from the real releases'",
        "# parsers by scripts/sglang_flag_types.py (do not edit by hand: run it again).",
        "#",
        "# type: int | float | human_readable_int (an int, or 4k, 1Mi...) | json | str | opaque (a",
        "#   parser of the release's own; any string) | switch (no value: true or false).",
        "# nargs: '+' or '*' when the flag takes a list. choices: every value any release takes.",
        "# in: the first and last release read that has the flag; source: where the release named",
        "#   in `typed` declares it (its type is that release's).",
        "# bench: sglang.bench_serving's flags, the same way (a preset's `bench`).",
        f"releases: {yaml.safe_dump(releases, default_flow_style=True).strip()}",
        "flags:",
    ]
    lines += _entries(merged, evidence)
    if bench:
        lines.append("bench:")
        lines += _entries(bench, evidence)
    return "\n".join(lines) + "\n"


def _entries(merged: dict[str, dict[str, Any]], evidence: dict[str, str]) -> list[str]:
    import yaml

    lines = []
    for flag in sorted(merged):
        entry = merged[flag]
        item: dict[str, Any] = {"type": entry["kind"]}
        if entry["nargs"] not in (None, 1):
            item["nargs"] = entry["nargs"]
        if "choices" in entry:
            item["choices"] = entry["choices"]
        if entry["aliases"]:
            item["aliases"] = sorted(a[2:] for a in entry["aliases"])
        item["in"] = [entry["first"], entry["last"]]
        item["typed"] = entry["typed_in"]
        where = evidence.get(f"{entry.get('tool', 'launch_server')} {flag}")
        item["source"] = where or "not found in the source (built dynamically)"
        body = yaml.safe_dump(item, default_flow_style=True, width=10_000, sort_keys=False)
        lines.append(f"  {flag[2:]}: {body.strip()}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, default=Path("/tmp/sgl"))
    parser.add_argument("--python", default=sys.executable,
                        help="Python 3.11 with msgspec and PyYAML, to run each release's parser")
    parser.add_argument("--releases", nargs="*", default=list(sglang_flags.KEPT))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    wheels = sglang_flags.find_wheels(args.wheels)
    missing = [v for v in args.releases if v not in wheels]
    if missing:
        raise SystemExit(f"no wheel for {', '.join(missing)} in {args.wheels}")
    releases: dict[str, dict[str, list[dict[str, Any]]]] = {"launch_server": {}, "bench": {}}
    for version in args.releases:
        print(f"reading {wheels[version].name}", file=sys.stderr)
        probed = sglang_flags.probe_wheel(wheels[version], python=args.python)
        releases["launch_server"][version] = probed["launch_server"]["actions"]
        releases["bench"][version] = probed["bench_serving"]["actions"]
    merged = merge(releases["launch_server"])
    bench = merge(releases["bench"])
    for entry in bench.values():
        entry["tool"] = "bench"
    evidence: dict[str, str] = {}
    by_release: dict[str, list[tuple[str, str]]] = {}
    for tool, table in (("launch_server", merged), ("bench", bench)):
        for flag, entry in table.items():
            by_release.setdefault(entry["typed_in"], []).append((tool, flag))
    for version, flags in by_release.items():
        with tempfile.TemporaryDirectory(prefix="sglang-src-") as scratch:
            with zipfile.ZipFile(wheels[version]) as archive:
                archive.extractall(scratch, members=[
                    n for n in archive.namelist() if n.startswith("sglang/")
                    and n.endswith(".py")])
            sources = read_sources(Path(scratch))
            for tool, flag in flags:
                where = declared_at(sources, flag, bench=tool == "bench")
                if where is not None:
                    evidence[f"{tool} {flag}"] = f"{version} {where}"
    text = render(merged, list(args.releases), evidence, bench)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {len(merged)} server and {len(bench)} bench flags of {len(args.releases)} "
          f"releases to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
