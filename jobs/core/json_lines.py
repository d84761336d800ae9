"""JSON lines read as hostile input (docs/contracts.md "Bounded work and any file"): a file's
bytes as UTF-8 lines (`decode_lines`), and one line as JSON (`decode_json`): each problem is one
RecordError naming the line (not UTF-8, UTF-16, NUL bytes, nested too deep, a lone surrogate,
NaN or Infinity, a number out of range), never a traceback. What a run record holds is
`jobs.core.records`'s to check."""

from __future__ import annotations

import codecs
import json
import math
from typing import Any

from jobs.errors import RecordError

MAX_DEPTH = 32  # a record nests 4 deep; deeper is an attack on whatever walks it


def decode_lines(data: bytes, *, source: str = "RUNS.jsonl") -> list[str]:
    """A file's bytes as text lines: UTF-8 (a UTF-8 byte-order mark is dropped), split on
    newlines only (JSON strings may hold U+2028); anything else names its line."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise RecordError(f"{source}:1: UTF-16 text (a byte-order mark); run records are UTF-8")
    data = data.removeprefix(codecs.BOM_UTF8)
    lines = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if b"\x00" in raw:
            raise RecordError(f"{source}:{number}: NUL bytes (UTF-16?); run records are UTF-8")
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise RecordError(
                f"{source}:{number}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                f"{exc.start + 1})"
            ) from None
    return lines


def decode_json(line: str, *, where: str) -> Any:
    """One line's JSON, bounded: finite numbers, at most MAX_DEPTH levels, no lone surrogate."""
    try:
        data = json.loads(line, parse_constant=_no_constant, parse_float=_finite_float,
                          parse_int=_bounded_int)
    except RecursionError:
        raise RecordError(f"{where}: nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise RecordError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:  # NaN, Infinity, a float or an integer out of range
        raise RecordError(f"{where}: {str(exc).splitlines()[0]}") from None
    _check_tree(data, where=where)
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{short(text)} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 30:  # no count, code or measurement has more digits
        raise ValueError(f"a number of {len(text)} digits is out of range")
    return int(text)


def _check_tree(data: Any, *, where: str) -> None:
    """Depth and strings of decoded JSON, walked without recursion."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise RecordError(f"{where}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            stack.extend((k, depth) for k in node)
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
        elif isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError as exc:
                code = ord(node[exc.start])
                raise RecordError(
                    f"{where}: a string holds a lone surrogate (\\u{code:04x})") from None


def short(value: Any, limit: int = 60) -> str:
    """`repr(value)` on one line, cut: a message quotes input, never floods with it."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
