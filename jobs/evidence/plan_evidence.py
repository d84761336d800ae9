"""Which collectives a batch's configurations need measured, and each record's `evidence`
(docs/contracts.md "Evidence for the why").

For each configuration: the model's shape (its `config.json` under the engine's model arg, or
the engine's own shape args), how many ranks share a layer (the engine's tensor-parallel args),
the tokens of one verify step (the engine's verify-token args; 1 without speculation), and its
collective environment (NCCL_*, GLOO_*, TORCH_NCCL_*). The probe then runs once per distinct
(world, collective env) over the message sizes that group needs. What the engine knows is data
(`evidence` in config/engines/<name>/engine.yaml); this module never names an engine.

A configuration whose shape is unknown, or that runs on one rank, gets a `missing` reason
instead of a measurement: evidence never fails a batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jobs.core.configs import RunConfig
from jobs.core.engine_info import EngineInfo
from jobs.evidence.model_shape import NoShape, ShapeOfModel, read_shape

COLLECTIVE_ENV = ("NCCL_", "GLOO_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_")
Group = tuple[int, tuple[tuple[str, str], ...]]  # (world, collective env)


@dataclass(frozen=True)
class Need:
    """What one configuration's evidence needs: a probe of `bytes` in its group, or nothing."""

    approach: str
    world: int
    env: tuple[tuple[str, str], ...]
    model: ShapeOfModel | None
    tokens: int
    missing: str | None = None  # why there is no measurement for it
    split: bool = False  # the engine runs one process: the probe is what a split would cost

    @property
    def group(self) -> Group:
        return self.world, self.env

    @property
    def bytes(self) -> int | None:
        return None if self.model is None else self.model.allreduce_bytes(self.tokens)


def collective_env(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in env.items() if k.startswith(COLLECTIVE_ENV)))


def need_of(config: RunConfig, info: EngineInfo,
            read: Callable[[str], ShapeOfModel] = read_shape) -> Need:
    """The evidence one configuration needs (never raises for a missing shape)."""
    facts = info.evidence
    args = config.server_args
    ranks = _int(_first_set(args, facts.get("tp_args", ())))
    world = ranks or int(facts.get("world", 1))
    env = collective_env(config.env)
    tokens = verify_tokens(args, facts.get("verify_tokens", ()))
    try:
        model = _shape(args, facts, read)
    except NoShape as exc:
        return Need(config.approach, world, env, None, tokens, missing=str(exc))
    if world < 2:
        return Need(config.approach, world, env, model, tokens,
                    missing="one rank per layer (no tensor parallelism): no all-reduce per step")
    return Need(config.approach, world, env, model, tokens, split=ranks is None)


def groups(needs: Iterable[Need]) -> dict[Group, list[int]]:
    """Each distinct (world, collective env) with the message sizes its configurations need."""
    out: dict[Group, set[int]] = {}
    for need in needs:
        if need.missing is None and need.bytes is not None:
            out.setdefault(need.group, set()).add(need.bytes)
    return {group: sorted(sizes) for group, sizes in out.items()}


def record_evidence(need: Need, probe: Mapping[str, Any] | None, *,
                    failed: str | None = None) -> dict[str, Any]:
    """The record's `evidence`: the model, and the all-reduce at its size from its group's
    probe (`probe` in docs/contracts.md's probe JSON); `missing` says why one part is absent."""
    out: dict[str, Any] = {"model": need.model.to_dict() if need.model else None,
                           "allreduce": None, "tokens_per_step": need.tokens}
    if need.missing is not None:
        return {**out, "missing": need.missing}
    if probe is None:
        return {**out, "missing": failed or "the collectives probe did not run"}
    size = next((s for s in probe.get("sizes", []) if s.get("bytes") == need.bytes), None)
    if size is None:
        return {**out, "missing": f"the probe measured no message of {need.bytes} bytes"}
    out["allreduce"] = {"backend": probe.get("backend"), "world": need.world,
                        "bytes": need.bytes, "latency_us": size.get("latency_us"),
                        "busbw_gbps": size.get("busbw_gbps"), "env": dict(need.env)}
    if need.model is not None:
        out["allreduces"] = need.model.allreduces
    if need.split:
        out["split"] = True
    return out


def verify_tokens(args: Mapping[str, Any], rules: Iterable[Mapping[str, Any]]) -> int:
    """Tokens one step carries: the first rule whose arg (or arg's JSON key) is set, plus its
    `plus`; 1 (plain decoding) when none is."""
    for rule in rules:
        value = args.get(str(rule.get("arg")))
        if rule.get("key") is not None:
            value = _mapping(value).get(str(rule["key"]))
        if (count := _int(value)) is not None:
            return count + int(rule.get("plus", 0))
    return 1


def _shape(args: Mapping[str, Any], facts: Mapping[str, Any],
           read: Callable[[str], ShapeOfModel]) -> ShapeOfModel:
    if (arg := facts.get("model_arg")) is not None:
        folder = args.get(str(arg))
        if not isinstance(folder, str) or not folder:
            raise NoShape(f"the configuration sets no {arg}")
        return read(folder)
    named = facts.get("shape_args") or {}
    layers, hidden = (_int(args.get(str(named.get(k)))) for k in ("layers", "hidden_size"))
    if layers is None or hidden is None:
        raise NoShape(f"the configuration sets no {named.get('layers')} or "
                      f"{named.get('hidden_size')}")
    return ShapeOfModel(layers=layers, hidden_size=hidden,
                        dtype_bytes=int(facts.get("dtype_bytes", 2)))


def _first_set(args: Mapping[str, Any], names: Iterable[str]) -> Any:
    return next((args[n] for n in names if args.get(n) is not None), None)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _mapping(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str):
        try:
            loaded = json.loads(value)
        except json.JSONDecodeError:
            return {}
        return loaded if isinstance(loaded, dict) else {}
    return {}
