"""The model's shape from config.json and the all-reduces of one verify step (issue 24)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.evidence.model_shape import NoShape, read_shape, shape_of

KIMI = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
        "text_config": {"num_hidden_layers": 61, "hidden_size": 7168, "n_routed_experts": 384,
                        "torch_dtype": "bfloat16"}}


def test_the_seeds_model_verifying_four_tokens_is_122_all_reduces_of_57344_bytes(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(KIMI))
    shape = read_shape(tmp_path)
    assert (shape.layers, shape.hidden_size, shape.dtype_bytes) == (61, 7168, 2)
    assert shape.moe and shape.experts == 384
    assert shape.allreduces == 122
    assert shape.allreduce_bytes(4) == 57344
    assert shape.to_dict() == {"layers": 61, "hidden_size": 7168, "dtype_bytes": 2,
                               "experts": 384}


def test_a_dense_float32_model_and_an_assumed_dtype() -> None:
    dense = shape_of({"n_layer": 4, "n_embd": 64, "torch_dtype": "float32"})
    assert (dense.allreduces, dense.allreduce_bytes(1), dense.moe) == (8, 256, False)
    assumed = shape_of({"num_hidden_layers": 2, "hidden_size": 32})
    assert assumed.dtype_bytes == 2 and assumed.to_dict()["dtype_assumed"] is True


@pytest.mark.parametrize(("files", "why"), [
    ({}, "no config.json in"),
    ({"config.json": "{not json"}, "cannot read"),
    ({"config.json": "[1, 2]"}, "is not a JSON object"),
    ({"config.json": json.dumps({"hidden_size": 64})}, "has no layers field"),
    ({"config.json": json.dumps({"num_hidden_layers": 2})}, "has no hidden size field"),
])
def test_a_missing_shape_is_a_reason_not_a_failure(
    tmp_path: Path, files: dict[str, str], why: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(NoShape, match=why):
        read_shape(tmp_path)
