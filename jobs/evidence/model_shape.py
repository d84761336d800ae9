"""A model's shape from its `config.json`, and the all-reduces one verify step costs under
tensor parallelism (docs/contracts.md "Evidence for the why").

Under tensor parallelism every transformer layer ends its attention and its MLP (or MoE) block
with one all-reduce of the step's activations: 2 per layer, each of tokens × hidden size × the
activations' dtype bytes. The seed's Kimi-K2.5 (61 layers, hidden 7168, bfloat16) verifying 4
tokens: 122 all-reduces of 57344 bytes. Under expert parallelism the MoE blocks exchange tokens
with all-to-all instead; the attention's all-reduce stays (the count is then an upper bound, and
`ShapeOfModel.moe` says so).

A folder without `config.json`, or a config without layer or hidden-size fields, is not an
error: `read_shape` raises `NoShape` with the reason the records keep, and the why falls back to
today's break-even line. Evidence never fails a batch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "dim")
EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts")
NESTED = ("text_config", "language_config", "llm_config")  # multimodal wrappers (Kimi-K2.5...)
DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2,
               "float8_e4m3fn": 1, "float8_e5m2": 1}
MAX_CONFIG_BYTES = 4 << 20
ALLREDUCES_PER_LAYER = 2


class NoShape(Exception):  # noqa: N818 - a reason, not a failure: the records keep it
    """Why a model's shape is unknown (kept in the records; the why falls back)."""


@dataclass(frozen=True)
class ShapeOfModel:
    layers: int
    hidden_size: int
    dtype_bytes: int
    experts: int | None = None  # routed experts of an MoE model; None for a dense one
    dtype_assumed: bool = False  # the config named no dtype: bfloat16's 2 bytes assumed

    @property
    def moe(self) -> bool:
        return bool(self.experts)

    @property
    def allreduces(self) -> int:
        """All-reduces of one forward step under tensor parallelism (2 per layer)."""
        return ALLREDUCES_PER_LAYER * self.layers

    def allreduce_bytes(self, tokens: int) -> int:
        """The message of one all-reduce when a step carries `tokens` tokens."""
        return max(1, tokens) * self.hidden_size * self.dtype_bytes

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"layers": self.layers, "hidden_size": self.hidden_size,
                               "dtype_bytes": self.dtype_bytes}
        if self.experts:
            out["experts"] = self.experts
        if self.dtype_assumed:
            out["dtype_assumed"] = True
        return out


def read_shape(model_dir: str | Path) -> ShapeOfModel:
    """The shape from `model_dir/config.json`; NoShape with the reason when it cannot tell."""
    path = Path(model_dir) / "config.json"
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise NoShape(f"{path} is over {MAX_CONFIG_BYTES >> 20} MiB: not a model config")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NoShape(f"no config.json in {model_dir}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NoShape(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise NoShape(f"{path} is not a JSON object")
    return shape_of(data, where=str(path))


def shape_of(config: Mapping[str, Any], *, where: str = "config.json") -> ShapeOfModel:
    """The shape a Hugging Face config describes (a multimodal one's language model)."""
    for key in NESTED:
        inner = config.get(key)
        if isinstance(inner, Mapping) and _first(inner, LAYER_KEYS) is not None:
            return shape_of({**{k: v for k, v in config.items() if k not in NESTED}, **inner},
                            where=f"{where} ({key})")
    layers, hidden = _first(config, LAYER_KEYS), _first(config, HIDDEN_KEYS)
    if layers is None or hidden is None:
        missing = [name for name, got in (("layers", layers), ("hidden size", hidden))
                   if got is None]
        raise NoShape(f"{where} has no {' or '.join(missing)} field "
                      f"({', '.join(LAYER_KEYS if layers is None else HIDDEN_KEYS)})")
    dtype = config.get("torch_dtype") or config.get("dtype")
    size = DTYPE_BYTES.get(str(dtype).removeprefix("torch.")) if dtype else None
    return ShapeOfModel(layers=layers, hidden_size=hidden, dtype_bytes=size or 2,
                        experts=_first(config, EXPERT_KEYS), dtype_assumed=size is None)


def _first(config: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
