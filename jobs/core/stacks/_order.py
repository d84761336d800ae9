"""Stacks in order (docs/contracts.md "Stacks"): by their engine's version, as each stack's own
interpreter reports it, then by the file's order; the stacks between two of them; a stack diff
in words; and, with nothing between, which stacks a bisection would need.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.stack import Stack
from jobs.core.stacks._stack_file import StackSpec
from jobs.errors import StackError

_VERSION = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")
MAX_LISTED = 4  # releases named one by one in what a bisection would need


def version_key(version: Any) -> tuple[int, ...] | None:
    """A version's leading numbers (`0.5.21` -> (0, 5, 21)); None when it has none."""
    found = _VERSION.match(str(version)) if version is not None else None
    return tuple(int(p) for p in found.group(1).split(".")) if found else None


def order_stacks(stacks: Sequence[StackSpec], *,
                 versions: Mapping[str, Any]) -> list[StackSpec]:
    """`stacks` by their engine's version (`versions`: name -> version), then the file's order;
    a stack whose version is unknown goes after those known."""
    def key(indexed: tuple[int, StackSpec]) -> tuple[int, tuple[int, ...], int]:
        index, spec = indexed
        found = version_key(versions.get(spec.name))
        return (0, found, index) if found is not None else (1, (), index)
    return [spec for _, spec in sorted(enumerate(stacks), key=key)]


def between(ordered: Sequence[StackSpec], *, good: str, bad: str,
            versions: Mapping[str, Any]) -> list[StackSpec]:
    """The stacks after `good` up to and including `bad`, in order: where a change that is not on
    `good` and is on `bad` may first appear. `good` must come before `bad`."""
    names = [s.name for s in ordered]
    for name, flag in ((good, "--from"), (bad, "--to")):
        if name not in names:
            raise StackError(f"{flag} {name}: not among the stacks of this engine "
                             f"({', '.join(names) or 'none'})")
    if good == bad:
        raise StackError(f"--from and --to are the same stack ({good}): nothing to bisect")
    first, last = names.index(good), names.index(bad)
    if first > last:
        raise StackError(
            f"--from {good} ({_version(versions, good)}) comes after --to {bad} "
            f"({_version(versions, bad)}) in version order: a bisection goes from the stack "
            "without the change to the one with it")
    return list(ordered[first + 1:last + 1])


def _version(versions: Mapping[str, Any], name: str) -> str:
    found = versions.get(name)
    return f"version {found}" if found is not None else "version unknown"


def stack_diff(before: Mapping[str, Any], after: Mapping[str, Any], *,
               engine: str | None = None) -> list[dict[str, Any]]:
    """What differs from one stack's fingerprint to another's: [{key, before, after}]."""
    return [{"key": key, "before": a, "after": b}
            for key, a, b in Stack.of(before, engine=engine).changes(
                Stack.of(after, engine=engine))]


def diff_text(diff: Sequence[Mapping[str, Any]]) -> str:
    """A stack diff in words: "<engine> 0.5.20 → 0.5.21; torch 2.8.0 → 2.9.0"."""
    if not diff:
        return "the same stack"
    return "; ".join(f"{d['key']} {d['before']} → {d['after']}" for d in diff)


def needed(diff: Sequence[Mapping[str, Any]], *, version_of: str | None = None) -> str:
    """What a bisection with no stacks between two would need installed: for the engine's
    version (`version_of`: its key), the releases between them; for another component, a stack
    with it between the two versions."""
    wants: list[str] = []
    for item in diff:
        key, a, b = str(item["key"]), item["before"], item["after"]
        if key == "engine" or a is None or b is None:
            continue
        inside = _releases_between(a, b) if key == version_of else None
        if inside == []:
            continue  # consecutive releases: nothing between them to install
        if inside:
            wants.append(f"{key} {' or '.join(inside)}")
        else:
            wants.append(f"{key} between {a} and {b}")
    if not wants:
        return "nothing: the two stacks are consecutive, so the change came with the second"
    return "a stack with " + ", or one with ".join(wants)


def _releases_between(a: Any, b: Any) -> list[str] | None:
    """The patch releases strictly between two of one minor series (0.5.20 and 0.5.23: 0.5.21,
    0.5.22), [] for consecutive ones; None when they are not of one series or too far apart."""
    low, high = version_key(a), version_key(b)
    if low is None or high is None or len(low) != 3 or len(high) != 3:
        return None
    if low > high:
        low, high = high, low
    if low[:2] != high[:2]:
        return None
    inside = [f"{low[0]}.{low[1]}.{patch}" for patch in range(low[2] + 1, high[2])]
    return inside if len(inside) <= MAX_LISTED else None
