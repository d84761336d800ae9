"""Values the CLI refuses before anything is stored or run (issue 14, item 3, in part).

The refusals run `bot.cli.main.main(argv)`, the `specbench` entry, in this process (as
tests/bot/test_bad_inputs.py does: the environment set with monkeypatch, stdout and stderr read
with capsys, argparse's exit read from its SystemExit); one case, SGLang missing, runs the real
`python -m bot.cli.main` as a subprocess, the whole command from start to exit code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.cli.main import main
from jobs.engines.sglang import probe as sglang_probe
from jobs.store import Store
from tests.builders import specbench_here

Cli = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    """`specbench ARGS` in this process (tests/builders.py `specbench_here`), with no SPECBENCH_
    setting but its own data dir under tmp_path (and those in `env`); nothing the process knew
    about SGLang carried in."""

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        sglang_probe.clear_memory()
        return specbench_here(capsys, *args, drop=("SPECBENCH_",), env={
            "SPECBENCH_DATA_DIR": str(tmp_path / "data"), **(env or {})})

    return run


def stored(tmp_path: Path) -> list[str]:
    database = tmp_path / "data" / "specbench.db"
    if not database.exists():
        return []
    return [row.id for row in Store(f"sqlite:///{database}").list_batches()]


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "soon"])
def test_a_timeout_of_no_time_is_bad_input(tmp_path: Path, cli: Cli, timeout: str) -> None:
    done = cli("run", "cpu-demo", "--timeout", timeout)
    assert done.returncode == 2 and "--timeout" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert stored(tmp_path) == []


def test_analyze_refuses_a_metric_no_record_measures_and_a_negative_effect(
    cli: Cli, seed_path: Path
) -> None:
    done = cli("analyze", str(seed_path), "--metric", "output_thruput")
    assert done.returncode == 2 and "measures 'output_thruput'" in done.stderr
    assert "did you mean 'output_throughput'" in done.stderr
    assert "FAILED" not in done.stdout
    done = cli("analyze", str(seed_path), "--min-effect", "-5")
    assert done.returncode == 2 and "--min-effect" in done.stderr
    assert cli("analyze", str(seed_path), "--min-effect", "0").returncode == 0


def test_sglang_missing_is_an_infrastructure_failure(tmp_path: Path) -> None:
    """The real command in a process of its own: exit 1, one message, no traceback."""
    env_python = "/nonexistent/sglang-python"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECBENCH_")}
    env.update(SPECBENCH_DATA_DIR=str(tmp_path / "data"), SPECBENCH_SGLANG_PYTHON=env_python)
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", "eagle3"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "no such interpreter" in done.stderr and "Traceback" not in done.stderr
    assert stored(tmp_path) == []


# ------------------------------------------------------------------ typed knob values

def refused(done: subprocess.CompletedProcess[str], tmp_path: Path, *needles: str) -> str:
    """Exit 2, one line on stderr holding every needle, no traceback, no batch stored."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert stored(tmp_path) == []
    return lines[0]


@pytest.mark.parametrize(("value", "wanted", "got"), [
    ("threads=abc", "threads takes an integer of 1 or more (local engine)", "got 'abc'"),
    ("threads=2.5", "threads takes an integer of 1 or more (local engine)", "got 2.5"),
    ("threads=0", "threads takes an integer of 1 or more (local engine)", "got 0"),
    ("seed=", "seed takes an integer (local engine)", "got nothing"),
    ("seed=null", "seed takes an integer (local engine)", "got nothing"),
    ("seed=1.5", "seed takes an integer (local engine)", "got 1.5"),
    ("seed=true", "seed takes an integer (local engine)", "got true"),
])
def test_a_local_knob_of_the_wrong_type_is_bad_input(
    tmp_path: Path, cli: Cli, value: str, wanted: str, got: str
) -> None:
    line = refused(cli("run", "cpu-demo", "--set", value), tmp_path, wanted, got)
    assert f"--set {value}:" in line


@pytest.mark.parametrize(("value", "wanted"), [
    ("mem-fraction-static=abc", "mem-fraction-static takes a number (SGLang), got 'abc'"),
    ("mem-fraction-static=", "mem-fraction-static takes a number (SGLang), got nothing"),
    ("cuda-graph-max-bs=1.5", "cuda-graph-max-bs takes an integer (SGLang), got 1.5"),
    ("cuda-graph-max-bs=many", "cuda-graph-max-bs takes an integer (SGLang), got 'many'"),
])
def test_an_sglang_knob_of_the_wrong_type_is_bad_input_without_sglang_here(
    tmp_path: Path, cli: Cli, value: str, wanted: str
) -> None:
    """The types ship with specbench: no SGLang on this host, still exit 2, not 1."""
    env = {"SPECBENCH_SGLANG_PYTHON": "/nonexistent/sglang-python"}
    done = cli("run", "eagle3", "--set", value, env=env)
    refused(done, tmp_path, f"--set {value}: {wanted}")


PRESET = """\
name: {name}
description: A preset with one value its engine would refuse
engine: {engine}
metric: output_throughput
reps: 1
bench: {{num-prompts: 1, input-len: 8, output-len: 8}}
baseline:
  server_args: {baseline}
approaches:
  - name: lookup
    hypothesis: Prompt lookup
    server_args: {approach}
"""


@pytest.mark.parametrize(("engine", "baseline", "approach", "needles"), [
    ("local", "{seed: 0, threads: abc}", "{prompt-lookup-num-tokens: 4}",
     ("preset 'typo', baseline: threads takes an integer of 1 or more (local engine), got 'abc'",)),
    ("local", "{seed: 0}", "{prompt-lookup-num-tokens: 4.5}",
     ("preset 'typo', approach 'lookup': prompt-lookup-num-tokens takes an integer", "got 4.5")),
    ("sglang", "{model-path: /models/m, tp-size: 8}", "{moe-a2a-backend: flashinfr}",
     ("approach 'lookup': moe-a2a-backend takes one of none, deepep,", "got 'flashinfr'")),
    ("sglang", "{model-path: /models/m, tp-size: eight}", "{ep-size: 8}",
     ("baseline: tp-size takes an integer (SGLang), got 'eight'",)),
    ("sglang", "{model-path: /models/m}", "{enable-torch-symm-mem: maybe}",
     ("enable-torch-symm-mem is a switch, true or false (SGLang), got 'maybe'",)),
])
def test_a_typed_error_inside_a_preset_file_is_bad_input(
    tmp_path: Path, cli: Cli, engine: str, baseline: str, approach: str,
    needles: tuple[str, ...],
) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(PRESET.format(name="typo", engine=engine, baseline=baseline,
                                  approach=approach))
    refused(cli("run", str(path)), tmp_path, *needles)


def test_a_sweep_grid_value_of_the_wrong_type_is_bad_input(tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / "grid.yaml"
    text = PRESET.format(name="grid", engine="local", baseline="{seed: 0}",
                         approach="{prompt-lookup-num-tokens: 4}")
    text += ("sweep:\n  name: lookup-tune\n  extends: lookup\n  grid:\n"
             "    prompt-lookup-num-tokens: [2, 4, six]\n  search: grid\n")
    path.write_text(text)
    refused(cli("run", str(path)), tmp_path,
            "preset 'grid', sweep 'lookup-tune': prompt-lookup-num-tokens takes an integer "
            "(local engine), got 'six'")


@pytest.mark.parametrize(("engine", "bench", "needle"), [
    ("sglang", "{dataset-name: random-ids, num-prompts: many}",
     "preset 'bench', bench: num-prompts takes an integer (SGLang), got 'many'"),
    ("sglang", "{dataset-name: sharegtp}",
     "preset 'bench', bench: dataset-name takes one of sharegpt, random,"),
    ("local", "{num-prompts: 1.5}",
     "preset 'bench', bench: num-prompts takes an integer (local engine), got 1.5"),
])
def test_a_bench_value_of_the_wrong_type_is_bad_input(
    tmp_path: Path, cli: Cli, engine: str, bench: str, needle: str
) -> None:
    path = tmp_path / "bench.yaml"
    text = PRESET.format(name="bench", engine=engine, baseline="{seed: 0}", approach="{}")
    path.write_text(text.replace("{num-prompts: 1, input-len: 8, output-len: 8}", bench))
    refused(cli("run", str(path)), tmp_path, needle)


# ------------------------------------------------------------------ one path for a value


def test_run_reads_its_preset_file_once_with_one_yaml_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """The file is read once and parsed once (its node tree kept for line numbers); the
    `--set` is read once where the CLI reads it, and its message quotes it as given."""
    import yaml

    path = tmp_path / "once.yaml"
    path.write_text(PRESET.format(name="once", engine="local", baseline="{seed: 0}",
                                  approach="{prompt-lookup-num-tokens: 4}")
                    + "overridable: [threads]\n")
    opened: list[Path] = []
    parses: list[str] = []
    real_open, real_parse = Path.open, yaml.composer.Composer.get_single_node

    def counted_open(self: Path, *args: object, **kwargs: object) -> object:
        if self == path:
            opened.append(self)
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    def counted_parse(self: yaml.composer.Composer) -> object:
        if "A preset with one value" in getattr(self, "buffer", ""):
            parses.append("preset")
        return real_parse(self)

    monkeypatch.setattr(Path, "open", counted_open)
    monkeypatch.setattr(yaml.composer.Composer, "get_single_node", counted_parse)
    assert main(["run", str(path), "--set", "threads=0x1z"]) == 2
    err = capsys.readouterr().err
    assert "--set threads=0x1z: threads takes an integer of 1 or more" in err, err
    assert (len(opened), len(parses)) == (1, 1)
