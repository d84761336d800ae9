"""A sweep's grid as a lazy sequence of points (docs/contracts.md "Every batch ends").

A grid of k knobs is a mixed-radix number: point p's index in knob j is p's j-th digit, the last
knob varying fastest (grid order). Any point is made on demand from its position, its index or
its name, and the grid's size is a product, never a list: planning a sweep, even an adaptive
one over thousands of points, builds only the points it touches ("bounded work"). Iterating
the whole grid (a grid search, a chart) makes one point at a time.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

import yaml

Scalar = str | int | float | bool | None
T = TypeVar("T")


def show_value(value: Scalar) -> str:
    """A value as a YAML scalar: 0.85, 128, true, null, fa3."""
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def point_name(name: str, point: Mapping[str, Scalar]) -> str:
    """`NAME@K=V,K=V`, the knobs in the grid's order."""
    return f"{name}@" + ",".join(f"{k}={show_value(v)}" for k, v in point.items())


def grid_size(grid: Mapping[str, Sequence[Any]]) -> int:
    """The number of points: the product of the value lists' lengths (nothing is built)."""
    return math.prod(len(values) for values in grid.values())


@dataclass(frozen=True)
class SweepPoint:
    """One point: its approach name, its knob values and their indices in the grid."""

    approach: str
    values: dict[str, Any]
    index: tuple[int, ...]


class OnDemand(Sequence[T]):
    """A sequence whose items are made when asked for (`_made(position)`), by position or slice:
    a grid's points, or their configurations, never held as a list."""

    def _made(self, position: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, key: int) -> T: ...

    @overload
    def __getitem__(self, key: slice) -> Sequence[T]: ...

    def __getitem__(self, key: int | slice) -> T | Sequence[T]:
        size = len(self)
        if isinstance(key, slice):
            return [self._made(i) for i in range(*key.indices(size))]
        position = operator.index(key)
        if position < 0:
            position += size
        if not 0 <= position < size:
            raise IndexError(f"point {key} of a {size}-point grid")
        return self._made(position)


class GridPoints(OnDemand[SweepPoint]):
    """The points of sweep `name` over `grid`, in grid order, each made when asked for."""

    def __init__(self, name: str, grid: Mapping[str, Sequence[Any]]) -> None:
        self.name = name
        self.knobs = tuple(grid)
        self.choices = tuple(tuple(grid[k]) for k in self.knobs)
        self.radices = tuple(len(values) for values in self.choices)
        self._size = math.prod(self.radices)
        self._shown: tuple[dict[str, int], ...] | None = None
        self._names: tuple[tuple[str, ...], ...] | None = None

    def __len__(self) -> int:
        return self._size

    def _made(self, position: int) -> SweepPoint:
        return self.at(self.index_at(position))

    def __iter__(self) -> Iterator[SweepPoint]:
        return (self.at(index) for index in self.indices())

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return self.find(item) is not None
        if isinstance(item, SweepPoint) and self.is_index(item.index):
            return self.at(item.index) == item
        return False

    def indices(self) -> Iterator[tuple[int, ...]]:
        """Every point's index, in grid order."""
        return itertools.product(*(range(r) for r in self.radices))

    def is_index(self, index: tuple[int, ...]) -> bool:
        return len(index) == len(self.radices) and all(
            0 <= i < r for i, r in zip(index, self.radices, strict=True))

    def index_at(self, position: int) -> tuple[int, ...]:
        """The index of the point at `position` in grid order (its mixed-radix digits)."""
        digits: list[int] = []
        for radix in reversed(self.radices):
            position, digit = divmod(position, radix)
            digits.append(digit)
        return tuple(reversed(digits))

    def position(self, index: tuple[int, ...]) -> int:
        """The inverse of `index_at`."""
        out = 0
        for digit, radix in zip(index, self.radices, strict=True):
            out = out * radix + digit
        return out

    def at(self, index: tuple[int, ...]) -> SweepPoint:
        """The point at `index` (one value index per knob)."""
        names = self._shown_names()
        name = f"{self.name}@" + ",".join(
            f"{knob}={names[j][i]}" for j, (knob, i) in enumerate(zip(self.knobs, index,
                                                                        strict=True)))
        values = {knob: self.choices[j][i] for j, (knob, i) in enumerate(zip(self.knobs, index,
                                                                             strict=True))}
        return SweepPoint(approach=name, values=values, index=tuple(index))

    def find(self, approach: str) -> SweepPoint | None:
        """The point named `approach`, or None (the name is read, not looked up in a list)."""
        head = f"{self.name}@"
        if not approach.startswith(head) or not self.knobs:
            return None
        index = self._parse(approach[len(head):], 0)
        return None if index is None else self.at(index)

    def _parse(self, text: str, j: int) -> tuple[int, ...] | None:
        """The value indices spelled by `text` from knob j on (`K=V,K=V`); a value may hold a
        comma or `=` itself, so every split where the next knob's name follows is tried."""
        lead = f"{self.knobs[j]}="
        if not text.startswith(lead):
            return None
        text = text[len(lead):]
        shown = self._shown_indices()[j]
        if j == len(self.knobs) - 1:
            last = shown.get(text)
            return None if last is None else (last,)
        sep = f",{self.knobs[j + 1]}="
        cut = text.find(sep)
        while cut >= 0:
            found = shown.get(text[:cut])
            if found is not None and (rest := self._parse(text[cut + 1:], j + 1)) is not None:
                return (found, *rest)
            cut = text.find(sep, cut + 1)
        return None

    def _shown_names(self) -> tuple[tuple[str, ...], ...]:
        if self._names is None:
            self._names = tuple(tuple(show_value(v) for v in values) for values in self.choices)
        return self._names

    def _shown_indices(self) -> tuple[dict[str, int], ...]:
        if self._shown is None:
            self._shown = tuple({shown: i for i, shown in reversed(list(enumerate(names)))}
                                for names in self._shown_names())
        return self._shown
