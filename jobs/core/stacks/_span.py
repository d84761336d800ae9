"""Where a confirmed watch change lies among the host's stacks (docs/contracts.md "Stacks",
`bisect WATCH`): whether a stack can explain it at all, its two ends, and the stacks between.

The watch knows the last good and the first bad point's stacks as fingerprints (the engine's
release, torch, CUDA, NCCL...), not by the stacks file's names. An end is the file's stack that
agrees with it on the engine's release and every component the change moved, else the point's
own stack, named by its engine's release and batch ("<engine> 0.5.23 (batch b-2)"): the watch may
have run on an interpreter upgraded in place. The stacks between are the file's whose engine
release lies strictly between the two ends' (a bisection orders stacks by the engine's release);
with none, `needs` says what a bisection would need installed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.core.engine_info import describe
from jobs.core.stack import Stack
from jobs.core.stacks._order import diff_text, needed, version_key
from jobs.core.stacks._stack_file import StackSpec

STACK_PARTS = ("torch", "cuda", "nccl")  # what a stack's interpreter decides, besides its engine


def release_key(engine: str) -> str:
    """The fingerprint's key of the engine's release (its engine.yaml's `version_key`)."""
    return describe(engine).version_key or engine


def point_label(point: Mapping[str, Any], *, engine: str) -> str:
    """A watch's point (`{"batch", "stack"}`) named by its engine's release and its batch."""
    key, stack = release_key(engine), point.get("stack") or {}
    return f"{key} {stack.get(key)} (batch {point.get('batch')})"


def moved_parts(diff: Sequence[Mapping[str, Any]], *, engine: str) -> list[dict[str, Any]]:
    """The entries of a watch's stack diff that a stack decides: the engine's release, torch,
    CUDA, NCCL (not the host, its GPUs, its driver or the model's revision)."""
    return [dict(d) for d in diff if d["key"] in (release_key(engine), *STACK_PARTS)]


def why_not_bisected(asked: Mapping[str, Any], *, engine: str) -> str | None:
    """Why no stack can explain a watch's change (`Change.bisect()`), or None when one may."""
    diff = list(asked.get("stack_diff") or [])
    if not diff:
        return ("it has no stack diff (same stack: the host or the workload changed), so no "
                "stack can explain it")
    if asked.get("environment"):
        return f"it is an environment change ({diff_text(diff)}), not a change of the stack"
    if not moved_parts(diff, engine=engine):
        return (f"its stack diff ({diff_text(diff)}) moved nothing a stack holds (the engine's "
                "release, torch, CUDA or NCCL)")
    return None


@dataclass(frozen=True)
class Span:
    """A watch change's ends among the host's stacks, the stacks between them in order, each
    one's stack (a fingerprint) by name, and, with none between, what a bisection would need."""

    good: str
    bad: str
    inside: tuple[str, ...] = ()
    stacks: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    needs: str | None = None

    @property
    def candidates(self) -> tuple[str, ...]:
        """What a bisection searches: the stacks between, then the bad end (known bad)."""
        return (*self.inside, self.bad)

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.good, "to": self.bad, "stacks": list(self.inside),
                "needs": self.needs}


def watch_span(
    ordered: Sequence[StackSpec], *, fingerprints: Mapping[str, Mapping[str, Any]],
    asked: Mapping[str, Any], engine: str,
) -> Span:
    """The change (`Change.bisect()`) among `ordered` (the host's stacks of `engine` in release
    order, each fingerprinted by its own interpreter: `fingerprints`)."""
    key = release_key(engine)
    moved = moved_parts(asked.get("stack_diff") or [], engine=engine)
    keys = list(dict.fromkeys([key, *(d["key"] for d in moved)]))
    seen = {s.name: dict(Stack.of(fingerprints.get(s.name) or {}, engine=engine).items())
            for s in ordered}
    ends: list[tuple[str, dict[str, Any]]] = []
    for point in (asked["last_good"], asked["first_bad"]):
        stack = dict(point.get("stack") or {})
        name = next((s.name for s in ordered if all(
            str(seen[s.name].get(k)) == str(stack.get(k)) for k in keys)), None)
        if name is not None:
            ends.append((name, dict(fingerprints[name])))
        else:
            ends.append((point_label(point, engine=engine), stack))
    (good, good_stack), (bad, bad_stack) = ends
    low, high = version_key(good_stack.get(key)), version_key(bad_stack.get(key))
    inside: list[str] = []
    if low is not None and high is not None and low != high:
        lowest, highest = min(low, high), max(low, high)
        for spec in ordered if low < high else list(reversed(ordered)):
            found = version_key(seen[spec.name].get(key))
            if found is not None and lowest < found < highest and spec.name not in (good, bad):
                inside.append(spec.name)
    stacks = {name: dict(fingerprints[name]) for name in inside}
    stacks.update({good: good_stack, bad: bad_stack})
    needs = None if inside else needed(moved, version_of=key)
    return Span(good=good, bad=bad, inside=tuple(inside), stacks=stacks, needs=needs)
