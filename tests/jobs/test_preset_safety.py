"""Preset safety: chat chooses presets by name only, and no knob that picks the model, a file or
the code a server runs is ever overridable (issue 10, item 1)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.commands import run
from jobs.commands.context import Caller, Context
from jobs.core.plans import (
    NAMES_ONLY,
    Preset,
    find_named_preset,
    find_preset,
    is_preset_name,
    is_protected_knob,
    load_all,
    load_preset,
    parse_preset,
    resolve,
)
from jobs.errors import KnobError, PresetError
from jobs.store import TERMINAL_STATES, Store
from tests.bot.conftest import DEMO, FakeEngine

EVIL = DEMO.replace("name: demo", "name: evil").replace(
    'env: {FAKE_VALUE: "100"', 'env: {PYTHONPATH: /tmp/evil, FAKE_VALUE: "100"')


def _with_overridable(knobs: str) -> str:
    return DEMO.replace("overridable: [mem-fraction-static]", f"overridable: [{knobs}]")


# --------------------------------------------------------------------------- names, not paths


@pytest.mark.parametrize("word", ["eagle3", "cpu-demo", "demo_2", "v1.2"])
def test_a_bare_name_is_a_preset_name(word: str) -> None:
    assert is_preset_name(word)


@pytest.mark.parametrize("word", [
    "../../x.yaml", "/abs/evil.yaml", "evil.yaml", "evil.yml", "EVIL.YAML", "dir/evil", "..",
    ".hidden", "..\\evil", "~/evil", "", "evil\x00", "a..b", " evil",
])
def test_anything_path_like_is_not(word: str) -> None:
    assert not is_preset_name(word)


def test_a_path_is_refused_by_name_lookup_whether_or_not_it_exists(
    config_copy: Path, tmp_path: Path
) -> None:
    real = tmp_path / "evil.yaml"
    real.write_text(EVIL)
    messages = set()
    for word in (str(real), str(tmp_path / "missing.yaml"), "../../x.yaml", "evil.yaml",
                 str(config_copy / "presets" / "eagle3.yaml"), "presets/eagle3"):
        with pytest.raises(PresetError) as info:
            find_named_preset(word)
        messages.add(str(info.value))
    assert messages == {NAMES_ONLY}
    assert find_named_preset("eagle3") == config_copy / "presets" / "eagle3.yaml"
    with pytest.raises(PresetError, match="unknown preset 'eagle'.*did you mean 'eagle3'"):
        load_preset("eagle", names_only=True)


def test_the_cli_still_loads_a_preset_file_by_path(tmp_path: Path) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text(EVIL)
    assert find_preset(str(path)) == path
    assert load_preset(str(path)).baseline.env["PYTHONPATH"] == "/tmp/evil"


# --------------------------------------------------------------------------- protected knobs


@pytest.mark.parametrize("knob", [
    "model-path", "model_path", "--model-path", "Model-Path", "model", "tokenizer-path",
    "trust-remote-code", "trust_remote_code", "trust-remote", "revision", "load-format",
    "json-model-override-args", "custom-weight-loader", "model-loader-extra-config", "config",
    "speculative-draft-model-path", "speculative-draft-model", "speculative-draft-model-revision",
    "speculative-draft-load-format", "lora-paths", "chat-template", "download-dir",
    "quantization-param-path", "ssl-keyfile", "enable-custom-logit-processor", "model-impl",
    "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "LD_PRELOAD", "LD_LIBRARY_PATH",
    "DYLD_INSERT_LIBRARIES",
    "PATH", "CUDA_PATH", "HF_HOME", "HF_ENDPOINT", "HF_MODULES_CACHE", "TRANSFORMERS_CACHE",
    "TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN",
    "BASH_ENV",
])
def test_knobs_that_choose_models_files_or_code_are_protected(knob: str) -> None:
    assert is_protected_knob(knob)


def test_each_engine_protects_its_own_flags_and_every_preset_all_of_them() -> None:
    """An engine's flag spellings are its own facts (its engine.yaml's `protected_args`), each a
    flag or an alias of that engine's release (its flag types); the check reads them all."""
    from jobs.core.engine_info import all_info
    from jobs.engines import type_table

    served = [info for info in all_info() if info.gpu]
    assert served and all(info.protected_args for info in served)
    for info in served:
        table = type_table(info.name)
        assert table is not None
        unknown = [arg for arg in info.protected_args if table.lookup(arg) is None]
        assert unknown == [], info.name
        assert all(is_protected_knob(arg) for arg in info.protected_args)
    assert {"model-path", "tokenizer-path"} <= next(
        i for i in served if i.name == "sglang").protected_args
    assert "tokenizer" in next(i for i in served if i.name == "vllm").protected_args


@pytest.mark.parametrize("knob", [
    "mem-fraction-static", "cuda-graph-max-bs", "tp-size", "dtype", "kv-cache-dtype",
    "attention-backend", "speculative-num-steps", "speculative-eagle-topk", "threads", "seed",
    "draft-layers", "max-concurrency", "NCCL_ALGO", "NCCL_MIN_NCHANNELS", "NCCL_DEBUG",
    "CUDA_VISIBLE_DEVICES", "FAKE_VALUE",
])
def test_knobs_under_test_are_not(knob: str) -> None:
    assert not is_protected_knob(knob)


@pytest.mark.parametrize("knob", ["model-path", "trust-remote-code", "PYTHONPATH", "LD_PRELOAD"])
def test_a_preset_listing_a_protected_knob_as_overridable_is_refused_at_load(knob: str) -> None:
    with pytest.raises(PresetError) as info:
        parse_preset(_with_overridable(f"mem-fraction-static, {knob}"),
                     source="cfg/demo.yaml", stem="demo")
    message = str(info.value)
    assert message.startswith("cfg/demo.yaml:9: overridable lists"), message
    assert repr(knob) in message and "never overridable" in message and "\n" not in message


def test_shipped_presets_load_and_list_no_protected_knob() -> None:
    presets = {p.name: p for p in load_all()}
    eagle3 = presets["eagle3"]
    assert eagle3.baseline.server_args["trust-remote-code"] is True
    assert "model-path" not in eagle3.overridable
    for preset in presets.values():
        assert not [k for k in preset.overridable if is_protected_knob(k)], preset.name


def test_set_of_a_protected_knob_is_refused_even_if_a_preset_lists_it() -> None:
    # A preset built in code skips the loader's check: resolving still refuses the override.
    base = parse_preset(DEMO, source="demo.yaml", stem="demo")
    preset = Preset.model_validate(
        {**base.model_dump(), "overridable": ("mem-fraction-static", "model-path")})
    with pytest.raises(KnobError, match="'model-path' is never overridable"):
        resolve(preset, overrides={"model-path": "/x"})
    with pytest.raises(KnobError, match="'PYTHONPATH' is never overridable"):
        resolve(base, overrides={"PYTHONPATH": "/tmp/evil"})
    with pytest.raises(KnobError, match="'model-path' is never overridable"):
        resolve(load_preset("eagle3"), overrides={"model-path": "/x"})
    assert resolve(base, overrides={"mem-fraction-static": 0.7}).baseline.server_args[
        "mem-fraction-static"] == 0.7


# --------------------------------------------------------------------------- the command layer


@pytest.fixture
def dispatcher(config_copy: Path) -> Iterator[EmbeddedDispatcher]:
    (config_copy / "presets" / "demo.yaml").write_text(DEMO)
    d = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    yield d
    d.close()


def _ctx(dispatcher: EmbeddedDispatcher, surface: str) -> Context:
    return Context(store=dispatcher.store, caller=Caller(user="U_ALICE", surface=surface),
                   make_dispatcher=lambda: dispatcher, engine_for=lambda name: FakeEngine())


@pytest.mark.parametrize("surface", ["slack", "console"])
def test_run_from_chat_refuses_paths_and_stores_nothing(
    dispatcher: EmbeddedDispatcher, tmp_path: Path, surface: str
) -> None:
    real = tmp_path / "evil.yaml"
    real.write_text(EVIL)
    for word in (str(real), str(tmp_path / "nope.yaml"), "../../x.yaml", "evil.yaml"):
        with pytest.raises(PresetError) as info:
            run.plan(_ctx(dispatcher, surface), run.RunArgs(preset=word))
        assert str(info.value) == NAMES_ONLY
    assert dispatcher.store.list_batches() == []


def test_run_from_the_cli_runs_a_preset_file_by_path(
    dispatcher: EmbeddedDispatcher, tmp_path: Path
) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(DEMO.replace("name: demo", "name: mine"))
    started = run.run(_ctx(dispatcher, "cli"), run.RunArgs(preset=str(path), reps=1))
    batch_id = started.submitted.batch.id
    deadline = time.monotonic() + 60
    while (row := dispatcher.store.get_batch(batch_id)) is None or row.state not in TERMINAL_STATES:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert row.preset == "mine" and row.state == "done"


@pytest.mark.parametrize("name", ["../evil", "evil.yaml", "a/b", ".hidden"])
def test_a_preset_name_is_never_path_like(name: str) -> None:
    # A stored batch names its preset; `retry` from chat loads it by that name again.
    with pytest.raises(PresetError, match="key 'name' must be a plain name"):
        parse_preset(DEMO.replace("name: demo", f"name: {name!r}"), source="cfg/x.yaml")
