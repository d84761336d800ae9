"""vLLM's value parsers, ported from vllm/engine/arg_utils.py and vllm/utils/argparse_utils.py.

Each flag's `type=` in the release's parser, by the name scripts/vllm_flags.py recorded for it
(`int`, `optional:int`, `json`, `dataclass:CompilationConfig`...): the same callables, so that
argparse words a refused value as the release does ("invalid int value: 'x'", "Value {bad cannot
be converted to <function loads at 0x...>."). A config dataclass (pydantic, extra="forbid")
refuses a key it lacks in pydantic's ValidationError text, naming the key.
"""

from __future__ import annotations

import argparse
import json
import re

TYPE_CHECKING = False  # typing's import is a tenth of a stand-in's start: annotations only
if TYPE_CHECKING:
    from typing import Any

PYDANTIC_DOCS = "https://errors.pydantic.dev/2.14/v"

def human_readable_int(value: str) -> int:
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        decimal = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        try:
            return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
        except ValueError as e:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to "
                f"use {number}{suffix.lower()} instead?") from e
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return human_readable_int(value)


def parse_type(return_type: Any) -> Any:
    def _parse_type(val: str) -> Any:
        try:
            return return_type(val)
        except ValueError as e:
            raise argparse.ArgumentTypeError(
                f"Value {val} cannot be converted to {return_type}.") from e
    return _parse_type


def optional_type(return_type: Any) -> Any:
    def _optional_type(val: str) -> Any:
        if val == "" or val == "None":
            return None
        return parse_type(return_type)(val)
    return _optional_type


def union_dict_and_str(val: str) -> Any:
    if not re.match(r"(?s)^\s*{.*}\s*$", val):
        return str(val)
    return optional_type(json.loads)(val)


def parse_reasoning_parser(val: str) -> str:
    return "" if val.lower() == "none" else val


def pydantic_error(model: str, errors: list[tuple[str, str, str, Any]]) -> str:
    """pydantic's ValidationError text: `1 validation error for SpeculativeConfig` and a block
    (location, message [type=..., input_value=..., input_type=...], docs link) per error."""
    count = len(errors)
    lines = [f"{count} validation error{'s' if count > 1 else ''} for {model}"]
    for where, message, kind, value in errors:
        lines += [where, f"  {message} [type={kind}, input_value={value!r}, "
                         f"input_type={type(value).__name__}]",
                  f"    For further information visit {PYDANTIC_DOCS}/{kind}"]
    return "\n".join(lines)


def unknown_keys(model: str, value: dict[str, Any], keys: list[str]) -> str | None:
    """pydantic's text for the keys a config dataclass (extra="forbid") does not have."""
    extra = [(k, "Unexpected keyword argument", "unexpected_keyword_argument", v)
             for k, v in value.items() if k not in keys]
    return pydantic_error(model, extra) if extra else None


def dataclass_parser(model: str, keys: list[str]) -> Any:
    """arg_utils' parse_dataclass: TypeAdapter(cls).validate_json, errors as repr(e)."""
    def parse_dataclass(val: str) -> Any:
        try:
            value = json.loads(val)
        except ValueError as e:
            raise argparse.ArgumentTypeError(pydantic_error(
                model, [("", f"Invalid JSON: {e.msg} at line {e.lineno} column {e.colno}",
                         "json_invalid", val)])) from e
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(pydantic_error(model, [(
                "", f"Input should be a dictionary or an instance of {model}", "dataclass_type",
                value)]))
        problem = unknown_keys(model, value, keys)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value
    return parse_dataclass


_PLAIN: dict[str, Any] = {
    "int": int, "float": float, "str": str, "json": parse_type(json.loads),
    "human_readable_int": human_readable_int,
    "human_readable_int_or_auto": human_readable_int_or_auto,
    "union_dict_and_str": union_dict_and_str, "parse_reasoning_parser": parse_reasoning_parser,
    "lower_underscore": lambda s: s.lower().replace("-", "_"),
    "device_ids": lambda s: [int(p) if p.isdigit() else p for p in
                             (part.strip() for part in s.split(","))],
    "comma_list": lambda s: [c.strip() for c in s.split(",") if c.strip()],
}


def value_type(kind: str | None, keys: list[str] | None) -> Any:
    if not kind:
        return None
    if kind.startswith("optional:"):
        return optional_type(value_type(kind.removeprefix("optional:"), keys))
    if kind.startswith("parse:"):
        return parse_type(value_type(kind.removeprefix("parse:"), keys))
    if kind.startswith("dataclass:"):
        return dataclass_parser(kind.removeprefix("dataclass:"), keys or [])
    return _PLAIN.get(kind, str)  # a parser of its own (the mm bucket config): any string
