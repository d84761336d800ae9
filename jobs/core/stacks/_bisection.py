"""A bisection over stacks (docs/contracts.md "Stacks", bisect): the first stack, among those
between a good one and a bad one, where a change appears, found by binary search in at most
ceil(log2(n)) batches for n candidates.

The input is plain data: the candidates in order (the bad stack last, known to have the
change) and, for each stack measured, whether it has the change: `by_values` judges a measured
value by which side of the change (the values before and after) it lies on, as the regression
watch sees a change; any other judgement may be given instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Judge = Callable[[float], bool]  # a measured value -> whether it has the change


@dataclass(frozen=True)
class Bisection:
    """Where the search stands: `candidates` in order, the last known to have the change, and
    `seen`, each stack measured with whether it has the change, in the order measured."""

    candidates: tuple[str, ...]
    seen: tuple[tuple[str, bool], ...] = ()

    def __post_init__(self) -> None:
        if not self.candidates:
            raise ValueError("a bisection needs at least the stack with the change")

    @property
    def max_batches(self) -> int:
        """The most batches the search takes: ceil(log2(n))."""
        return math.ceil(math.log2(len(self.candidates)))

    def bounds(self) -> tuple[int, int]:
        """The range of candidates the first stack with the change is still in."""
        low, high = 0, len(self.candidates) - 1
        for name, has_change in self.seen:
            index = self.candidates.index(name)
            if has_change:
                high = min(high, index)
            else:
                low = max(low, index + 1)
        return low, high

    def next_stack(self) -> str | None:
        """The stack to measure next, or None once the first with the change is known."""
        low, high = self.bounds()
        return self.candidates[(low + high) // 2] if low < high else None

    def measured(self, stack: str, *, has_change: bool) -> Bisection:
        if stack not in self.candidates:
            raise ValueError(f"{stack} is not a candidate")
        return Bisection(self.candidates, (*self.seen, (stack, has_change)))

    @property
    def first(self) -> str | None:
        """The first stack with the change, once found."""
        low, high = self.bounds()
        return self.candidates[low] if low == high else None

    def before(self, good: str) -> str:
        """The stack just before the first with the change (`good` when it is the first)."""
        first = self.first
        assert first is not None
        index = self.candidates.index(first)
        return self.candidates[index - 1] if index else good


def by_values(*, before: float, after: float) -> Judge:
    """A value has the change when it lies nearer the value after it than the value before."""
    return lambda value: abs(value - after) < abs(value - before)


def run_bisection(candidates: Sequence[str], *, measure: Callable[[str], float | None],
                  judge: Judge) -> Bisection:
    """The whole search with `measure` (one batch per stack; None: it measured nothing, which
    stops the search where it stands)."""
    state = Bisection(tuple(candidates))
    while (stack := state.next_stack()) is not None:
        value = measure(stack)
        if value is None:
            break
        state = state.measured(stack, has_change=judge(value))
    return state
