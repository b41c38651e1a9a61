"""The time axis: simulated time and history columns to x, and its drawn scale.

Every event gets a column; the gap between two instants grows with the log of the
time between them, so a 1 µs race and a 30 s lease both stay visible. A stretch with no
event of `IDLE` leases or more (a drain waiting for retries, a long clock jump) is cut
short: drawn as a narrow break labelled with its length, after the last lease that ends
in it, so the waits of a drain do not squash the race that matters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from leasecheck.stateful.history import Event
from leasecheck.stateful.story.svg.doc import Svg
from leasecheck.stateful.story.svg.style import GAP_LOG, GAP_MIN, LEFT, STEP

IDLE = 2
"""A stretch with no event this many leases long, or longer, is cut short."""
BREAK = 40
"""How wide a cut-short stretch is drawn."""


def time_label(us: float, second: int) -> str:
    """A tick's label: whole seconds, plus the microseconds a race turns on."""
    whole, rest = divmod(int(us), second)
    if rest == 0:
        return f"{whole}s"
    if rest < 1000:
        return f"{whole}s+{rest}µs"
    return f"{us / second:g}s"


def duration_label(us: float, second: int) -> str:
    """A cut stretch's length, the way a person says it: `45s`, `9m30s`, `2h05m`."""
    s = round(us / second)
    if s < 60:
        return f"{us / second:.3g}s"
    if s < 3600:
        m, s = divmod(s, 60)
        return f"{m}m{s:02d}s" if s else f"{m}m"
    h, m = divmod(s // 60, 60)
    return f"{h}h{m:02d}m"


@dataclass(frozen=True)
class Cut:
    """A stretch with no event, drawn `BREAK` wide from x0 on: from `start` to `stop`."""

    start: float
    """The last moment drawn to scale: the previous instant, or the last lease end after it."""
    stop: float
    """The next instant."""
    x0: float
    x1: float


class Axis:
    """Maps simulated time and history columns to x."""

    def __init__(self, cols: list[Event], second: int, lease: int, keep: list[int]) -> None:
        """`keep`: moments drawn to scale even inside an idle stretch (lease ends)."""
        self.second = second
        self.col_x: list[float] = []
        self.instants: list[tuple[float, float, float]] = []  # (time, first x, last x)
        self.cuts: dict[int, Cut] = {}
        """Cut stretches, by the index of the instant that ends them."""
        kept = sorted(set(keep))
        x = float(LEFT + STEP)
        last: float | None = None
        for e in cols:
            at = e.at if last is None else max(e.at, last)
            if last is not None and at > last:
                x = self._after(last, at, x, lease, kept)
            elif last is not None:
                x += STEP
            if last is None or at > last:
                self.instants.append((at, x, x))
            else:
                t, first, _ = self.instants[-1]
                self.instants[-1] = (t, first, x)
            self.col_x.append(x)
            last = at
        if not self.instants:
            self.instants.append((0.0, x, x))

    def _after(self, last: float, at: float, x: float, lease: int, kept: list[int]) -> float:
        """Return the x of the instant `at` after the one at `last`, drawn at `x`."""
        if at - last < IDLE * lease:
            return x + self._gap(at - last)
        start = max([last, *(t for t in kept if last < t < at)])
        if at - start <= lease:  # a lease ends late in the stretch: little to cut
            return x + self._gap(at - last)
        x0 = x + (self._gap(start - last) if start > last else GAP_MIN)
        self.cuts[len(self.instants)] = Cut(start, at, x0, x0 + BREAK)
        return x0 + BREAK + GAP_MIN

    def _gap(self, dt: float) -> float:
        return GAP_MIN + GAP_LOG * math.log2(1 + dt / self.second)

    def at(self, t: float) -> float:
        """Return x for time `t`: just before its instant's events, or between instants."""
        for i, (ti, first, _) in enumerate(self.instants):
            if t <= ti:
                if i == 0 or t == ti:
                    return first - STEP / 2 if t == ti else first - self._gap(ti - t)
                tp, _, lastp = self.instants[i - 1]
                cut = self.cuts.get(i)
                if cut is None:
                    return lastp + (first - lastp) * (t - tp) / (ti - tp)
                if t <= cut.start:
                    return lastp + (cut.x0 - lastp) * (t - tp) / (cut.start - tp)
                return cut.x0 + (first - cut.x0) * (t - cut.start) / (ti - cut.start)
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
    for cut in axis.cuts.values():
        mid = (cut.x0 + cut.x1) / 2
        svg.add("rect", x=f"{mid - 7:.1f}", y=axis_y - 4, width=14, height=8, fill="white")
        for dx in (-6, 0):
            svg.add(
                "path", d=f"M{mid + dx:.1f},{axis_y + 5} l6,-10", stroke="#777", stroke_width=1.5
            )
        svg.text(
            mid,
            axis_y - 15,
            f"+{duration_label(cut.stop - cut.start, second)}",
            size=9,
            fill="#555",
            text_anchor="middle",
            class_="cut-label",
        )


def cut_over(svg: Svg, axis: Axis, top: float, bottom: float, second: int) -> None:
    """Break the lanes where the axis is cut: what crosses a cut stretch shows a gap."""
    for cut in axis.cuts.values():
        idle = duration_label(cut.stop - cut.start, second)
        svg.add(
            "rect",
            x=f"{cut.x0 + 8:.1f}",
            y=top,
            width=f"{cut.x1 - cut.x0 - 16:.1f}",
            height=bottom - top,
            fill="white",
            fill_opacity=0.8,
            title=f"{idle} with no event, cut short",
            class_="axis-cut",
            data_from=f"{cut.start:.0f}",
            data_to=f"{cut.stop:.0f}",
        )
        for x in (cut.x0 + 8, cut.x1 - 8):
            svg.add(
                "line",
                x1=f"{x:.1f}",
                x2=f"{x:.1f}",
                y1=top,
                y2=bottom,
                stroke="#999",
                stroke_dasharray="2 3",
            )
