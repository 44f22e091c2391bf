"""One curve of the dashboard, bounded for a run that lasts days: evenly thinned as it grows.

A run of days makes hundreds of thousands of steps, and the dashboard plotted every one of every tag (~110
bytes a point, kept for the process's life). A curve keeps at most `max_points`: it keeps the steps that are
multiples of its stride, and doubles the stride (dropping every other kept point) when it is full, so the
points stay evenly spread over the whole run; the newest point is always kept, so the curve's end is current.
"""

from __future__ import annotations


class Curve:
    def __init__(self, max_points: int = 4096):
        if max_points < 2:
            raise ValueError(f"a curve keeps at least 2 points, got {max_points}")
        self.max_points = max_points
        self.stride = 1
        self._points: dict[int, float] = {}
        self._newest: int | None = None

    def add(self, step: int, value: float) -> None:
        newest = self._newest
        if newest is None or step >= newest:
            if newest is not None and newest != step and newest % self.stride:
                del self._points[newest]  # kept only while it was the newest
            self._newest = step
        elif step % self.stride:
            return  # an older step (a late eval) off the kept steps: the spread stays even
        self._points[step] = value
        while len(self._points) > self.max_points:
            self.stride *= 2
            self._points = {s: v for s, v in self._points.items() if s % self.stride == 0 or s == self._newest}

    def points(self) -> list[tuple[int, float]]:
        return sorted(self._points.items())

    def __len__(self) -> int:
        return len(self._points)
