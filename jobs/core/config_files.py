"""A config file of ours read alike in every one. `read_text`: the text of a small file read as
untrusted input (docs/contracts.md "Bounded work and any file": a preset, the host's stacks file):
at most `limit` bytes, UTF-8. `load_yaml`: a document parsed by libyaml where PyYAML has it (an
engine's 100 KB flag-type table: 0.02 s instead of 0.15 s, in every `specbench` process that
plans a batch), its errors in the pure-Python parser's words. `parsed_once`: a table parsed once
per process for its text, wherever the file lies (a copied config folder holds the same table).
`top_level`: its parsed top level (the failure rules, an engine's flag tables), a mapping of known
keys only. A problem is one line that names the file."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from jobs.errors import PresetError

FAST_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
T = TypeVar("T")
_PARSED: dict[tuple[str, str], Any] = {}  # (kind, text) -> parsed, oldest first
_PARSED_MAX = 16


def read_text(path: Path, *, limit: int, noun: str, rule: str,
              error: type[Exception] = PresetError, where: str | None = None) -> str:
    """The UTF-8 text of the file at `path` (a byte-order mark dropped); one `error` line naming
    `where` (the path by default) for a file that is unreadable, larger than `limit` bytes, UTF-16,
    binary or not UTF-8. `noun` names what the file is ("preset"), `rule` what it must be
    ("presets are UTF-8 text")."""
    where = where or str(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise error(f"{where}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise error(f"{where}: larger than {limit // 1024} KiB; a {noun} is a short YAML file")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise error(f"{where}: UTF-16 text (a byte-order mark); {rule}")
    if b"\x00" in data:
        raise error(f"{where}: a binary file (NUL bytes), not a YAML {noun}; {rule}")
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{path}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x}); {rule}") from None


def load_yaml(text: str) -> Any:
    """`yaml.safe_load(text)`, by libyaml when it is there. A document it refuses is parsed again
    by the pure-Python parser, so that the YAMLError raised (and the message made of it) is the
    one every other file's error has."""
    try:
        return yaml.load(text, Loader=FAST_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError:
        return yaml.safe_load(text)  # raises the same problem in its own words


def parsed_once(path: Path, kind: str, parse: Callable[[str, str], T]) -> T:
    """`parse(text, source)` of the file at `path` (its text and its name for messages), kept
    for that text and `kind`: the same table in another folder is not parsed again. A table
    that fails to parse is not kept, so each file's error names that file."""
    text = path.read_text(encoding="utf-8")
    key = (kind, text)
    if key not in _PARSED:
        parsed = parse(text, str(path))
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = parsed
    return _PARSED[key]  # type: ignore[no-any-return]


def top_level(data: Any, *, source: str, keys: Sequence[str]) -> dict[str, Any]:
    """`data` (a parsed document) when it is a mapping of `keys` only."""
    if not isinstance(data, dict):
        raise PresetError(f"{source}: expected a mapping with {_listed(keys)}")
    unknown = sorted(str(key) for key in data if key not in keys)
    if unknown:
        expected = ", ".join(repr(key) for key in keys)
        raise PresetError(f"{source}: unknown key {unknown[0]!r} (expected {expected})")
    return data


def _listed(keys: Sequence[str]) -> str:
    """'a', 'b' and 'c'."""
    named = [repr(key) for key in keys]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
