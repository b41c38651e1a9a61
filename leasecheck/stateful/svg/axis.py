"""The time axis: simulated time and history columns to x, and its drawn scale."""

from __future__ import annotations

import math

from leasecheck.stateful.history import Event
from leasecheck.stateful.svg.doc import Svg
from leasecheck.stateful.svg.style import GAP_LOG, GAP_MIN, LEFT, STEP


def time_label(us: float, second: int) -> str:
    """A tick's label: whole seconds, plus the microseconds a race turns on."""
    whole, rest = divmod(int(us), second)
    if rest == 0:
        return f"{whole}s"
    if rest < 1000:
        return f"{whole}s+{rest}µs"
    return f"{us / second:g}s"


class Axis:
    """Maps simulated time and history columns to x."""

    def __init__(self, cols: list[Event], second: int) -> None:
        self.second = second
        self.col_x: list[float] = []
        self.instants: list[tuple[float, float, float]] = []  # (time, first x, last x)
        x = float(LEFT + STEP)
        last: float | None = None
        for e in cols:
            at = e.at if last is None else max(e.at, last)
            if last is not None:
                x += self._gap(at - last) if at > last else STEP
            if last is None or at > last:
                self.instants.append((at, x, x))
            else:
                t, first, _ = self.instants[-1]
                self.instants[-1] = (t, first, x)
            self.col_x.append(x)
            last = at
        if not self.instants:
            self.instants.append((0.0, x, x))

    def _gap(self, dt: float) -> float:
        return GAP_MIN + GAP_LOG * math.log2(1 + dt / self.second)

    def at(self, t: float) -> float:
        """Return x for time `t`: just before its instant's events, or between instants."""
        for i, (ti, first, _) in enumerate(self.instants):
            if t <= ti:
                if i == 0 or t == ti:
                    return first - STEP / 2 if t == ti else first - self._gap(ti - t)
                tp, _, lastp = self.instants[i - 1]
                return lastp + (first - lastp) * (t - tp) / (ti - tp)
        tl, _, lastl = self.instants[-1]
        return lastl + self._gap(t - tl)

    @property
    def end(self) -> float:
        return self.instants[-1][2]


def grid(
    svg: Svg,
    axis: Axis,
    axis_y: float,
    top: float,
    bottom: float,
    second: int,
    later: list[int],
) -> None:
    """Shade each instant's columns and label the instants (and later lease ends) on top."""
    label_end = -1e9
    stop = max([axis.end + STEP, *(axis.at(t) for t in later)])
    svg.add("line", x1=LEFT, x2=f"{stop:.0f}", y1=axis_y, y2=axis_y, stroke="#999")
    ticks: list[tuple[float, str]] = []
    for i, (t, first, last) in enumerate(axis.instants):
        x0, x1 = first - STEP / 2 + 2, last + STEP / 2 - 2
        shade = "#f3f6fb" if i % 2 == 0 else "#fbfbf3"
        svg.add(
            "rect", x=f"{x0:.1f}", y=top, width=f"{x1 - x0:.1f}", height=bottom - top, fill=shade
        )
        ticks.append((x0, time_label(t, second)))
    ticks += [
        (axis.at(t), time_label(t, second)) for t in sorted(set(later)) if t > axis.instants[-1][0]
    ]
    for x, label in ticks:
        svg.add("line", x1=f"{x:.1f}", x2=f"{x:.1f}", y1=axis_y - 3, y2=axis_y + 3, stroke="#999")
        if x > label_end:
            svg.text(x, axis_y - 5, label, size=9, fill="#333")
            label_end = x + len(label) * 5.4 + 4
