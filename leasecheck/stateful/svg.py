"""Draw a history as an SVG picture: who held which lease when, and whose completion won.

    leasecheck svg HISTORY.json [-o OUT.svg]

One lane per worker, simulated time left to right. Each claim is a bar in its job's
colour from the claim to the end of its lease as the judge saw it (the heartbeats it
accepted from the owner extend it); a
worker that still holds a job after its lease ran out gets a hatched tail up to its
completion, failure or crash. So a race reads at a glance: two bars of one job in two
lanes, two green completions. Events that happen at one simulated instant get a
column each, in history order, and the gap between instants grows with the elapsed
time on a log scale: a 1 µs race and a 30 s lease both stay visible.

It reads the same `History` the text timeline renders, and the leases of the judge
that judged it again from the file's saved facts: it computes no lease of its own (a
claim never committed, one rolled back, shows the lease it was handed). The violation
it marks is the one the machine found. Plain SVG, no dependencies.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from leasecheck.stateful.history import Event, History
from leasecheck.stateful.judge import Judge, rejudge
from leasecheck.stateful.model import Grant
from leasecheck.stateful.properties import DESCRIPTIONS
from leasecheck.stateful.units import SECOND

STRIP = ("producer", "clock")
"""Lanes drawn as thin rows at the top, one each: they hold no leases."""

_PALETTE = ("#4e79a7", "#f28e2b", "#b07aa1", "#9c755f", "#76b7b2", "#d4a017", "#ff9da7", "#2f4b7c")
_OK, _RED, _GREY, _INK = "#2e9e44", "#d32f2f", "#e6e6e6", "#222222"
_LEFT, _STEP, _GAP_MIN, _GAP_LOG = 84, 26, 16, 36
_ROW, _LEVEL, _LABELS = 18, 11, 2
_FONT = "font-family='DejaVu Sans, Verdana, sans-serif'"
_CHAR = 5.6  # rough width of one 9.5 px character, to keep labels from overlapping
_STRIP_ROW = 26  # two label levels above the dots, the lane name beside them
_MARGIN = 12  # kept clear right of the widest text


def _text_width(s: str, size: float = 9.5, bold: bool = False) -> float:
    """Estimate how wide `s` is drawn, so the picture can be made wide enough for it."""
    return len(s) * _CHAR * size / 9.5 * (1.15 if bold else 1.0)


@dataclass(eq=False)
class _Bar:
    """One claim: its lease, how it ended, and what happened on it."""

    worker: str
    job: str
    token: str | None
    col: int
    lease_end: int
    wait_col: int | None = None
    end_col: int | None = None
    end_why: str = ""
    row: int = 0
    hot: bool = False
    marks: list[tuple[int, str, bool]] = field(default_factory=list)
    """(column, op, accepted) of heartbeats, completions, failures and sends on the bar."""
    voided: set[int] = field(default_factory=set)
    lapses: list[tuple[int, int]] = field(default_factory=list)
    """(lease end, column of the heartbeat that revived it) for each lapse."""
    grant: Grant | None = None
    """The judge's grant for this claim (None: never committed); its lease is the bar's."""
    beats: dict[int, int] = field(default_factory=dict)
    """When each heartbeat on the bar was sent -> its column."""


@dataclass
class _Mark:
    """A marker that belongs to a lane rather than to a bar."""

    col: int
    lane: str
    kind: str
    label: str
    title: str


@dataclass
class _Parsed:
    cols: list[Event] = field(default_factory=list)
    bars: list[_Bar] = field(default_factory=list)
    marks: list[_Mark] = field(default_factory=list)
    pauses: list[tuple[str, int, int | None, str]] = field(default_factory=list)
    waits: list[tuple[str, int, int]] = field(default_factory=list)
    jobs: dict[str, str] = field(default_factory=dict)
    lanes: list[str] = field(default_factory=list)


def _time(us: float, second: int) -> str:
    whole, rest = divmod(int(us), second)
    if rest == 0:
        return f"{whole}s"
    if rest < 1000:
        return f"{whole}s+{rest}µs"
    return f"{us / second:g}s"


def _parse(history: History, judge: Judge) -> _Parsed:
    """Walk the history once: columns, bars with their ends, lane markers."""
    reader = _Reader(judge)
    for e in history.events:
        reader.read(e)
    return reader.done()


_Key = tuple[str, str, str | None, str | None]


class _Reader:
    """What the history has said so far: open bars, transactions, pauses, blocked calls."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.lease = judge.rules.lease
        self.p = _Parsed()
        self.ids: dict[str, str] = {}
        self.invoked: dict[_Key, float] = {}
        self.blocked: dict[tuple[str, str], int] = {}
        self.open: dict[str, list[_Bar]] = {}
        self.txn: dict[str, tuple[list[_Bar], list[_Bar]]] = {}
        self.paused: dict[str, tuple[int, str]] = {}

    def read(self, e: Event) -> None:
        p = self.p
        if e.worker not in STRIP and e.worker not in p.lanes:
            p.lanes.append(e.worker)
        key = (e.worker, e.op, e.job, e.token)
        if e.kind == "invoke":
            self.invoked[key] = e.at
            return
        col = len(p.cols)
        p.cols.append(e)
        sent = self.invoked.get(key, e.at)  # the oracle dates a call by when it was sent
        waited = self.blocked.pop((e.worker, e.op), None) if e.kind != "event" else None
        if e.op == "enqueue" and e.kind == "ok":
            self.ids[str(e.value)] = self._job(e.job or "?")
            p.marks.append(_Mark(col, e.worker, "enqueue", f"+{e.job}", f"enqueue {e.job}"))
        elif e.op == "claim" and e.kind == "ok" and isinstance(e.value, dict):
            job_id = e.value.get("job_id")
            job = self._job(self.ids.get(str(job_id), f"job?{job_id}"))
            # The lease is the judge's: from the claim, extended by the heartbeats it
            # accepted as the owner's. A claim never committed keeps the lease it was given.
            grant = self.judge.grant_of(e.seq)
            lease_end = grant.lease_end if grant else int(sent) + self.lease
            b = _Bar(e.worker, job, e.value.get("token"), col, lease_end, waited, grant=grant)
            p.bars.append(b)
            self.open.setdefault(e.worker, []).append(b)
            if e.worker in self.txn:
                self.txn[e.worker][0].append(b)
        elif e.op == "claim" and e.kind == "ok":
            p.marks.append(_Mark(col, e.worker, "loose", "none", "claim: nothing to claim"))
        elif e.op in ("heartbeat", "complete", "fail", "send") and e.kind != "event":
            self._on_bar(e, col, int(sent), waited)
        elif e.kind == "event":
            self._event(e, col)
        else:
            title = f"{e.op} {e.kind}: {e.note or e.value}"
            p.marks.append(_Mark(col, e.worker, "loose", e.op, title))

    def done(self) -> _Parsed:
        for b in self.p.bars:  # a heartbeat the judge took after the lease ran out revived it
            for at, ended in b.grant.renewals if b.grant else []:
                if at > ended and at in b.beats:
                    b.lapses.append((ended, b.beats[at]))
        for worker, (start, why) in self.paused.items():
            self.p.pauses.append((worker, start, None, why))
        return self.p

    def _job(self, label: str) -> str:
        self.p.jobs.setdefault(label, _PALETTE[len(self.p.jobs) % len(_PALETTE)])
        return label

    def _bar_of(self, e: Event) -> _Bar | None:
        for b in reversed(self.open.get(e.worker, [])):
            if b.job == e.job and (e.token is None or b.token == e.token):
                return b
        return None

    def _end(self, b: _Bar, col: int, why: str) -> None:
        b.end_col, b.end_why = col, why
        self.open[b.worker].remove(b)
        if b.worker in self.txn:
            self.txn[b.worker][1].append(b)

    def _on_bar(self, e: Event, col: int, sent: int, waited: int | None) -> None:
        """A heartbeat, completion, failure or sent effect of a claim the worker holds."""
        held = self._bar_of(e)
        value = e.value
        accepted = value is True or (isinstance(value, dict) and bool(value.get("accepted")))
        op = e.op if e.kind == "ok" else f"{e.op}:{e.kind}"
        if held is None:
            title = f"{e.op} {e.job} ({e.kind})"
            self.p.marks.append(_Mark(col, e.worker, "loose", e.op, title))
        else:
            held.marks.append((col, op, accepted))
            if e.op == "heartbeat":
                held.beats.setdefault(sent, col)
            elif e.op in ("complete", "fail"):
                self._end(held, col, e.op)
        if waited is not None:
            self.p.waits.append((e.worker, waited, col))

    def _event(self, e: Event, col: int) -> None:
        """Handle one `event` line: pauses, crashes, cuts, transactions, blocked calls."""
        p, w = self.p, e.worker
        title = " ".join(str(x) for x in (e.op, e.job or "", e.value or "", e.note) if x)
        kind, label = "event", e.op
        if w == "clock":
            kind, label, title = "advance", f"→{e.value}", f"clock advances to {e.value}"
        elif e.op == "pause":
            self.paused[w] = (col, e.note or "paused")
            kind, label = "pause", e.note or "pause"
        elif e.op == "resume":
            start, why = self.paused.pop(w, (col, "paused"))
            p.pauses.append((w, start, col, why))
            kind = "resume"
        elif e.op == "crash":
            for b in list(self.open.get(w, [])):
                self._end(b, col, "crash")
            if w in self.paused:
                start, why = self.paused.pop(w)
                p.pauses.append((w, start, col, why))
            kind = "crash"
        elif e.op == "begin":
            self.txn[w] = ([], [])
            kind = "txn"
        elif e.op in ("commit", "rollback"):
            claimed, ended = self.txn.pop(w, ([], []))
            if e.op == "rollback":
                self._roll_back(claimed, ended, col)
            kind = "txn"
        elif e.note.startswith("blocked"):
            self.blocked[(w, e.op)] = col
            kind, label = "blocked", f"{e.op} waits"
        elif e.note.startswith("cancelled"):
            kind, label = "cancel", f"{e.op} cancelled"
        elif e.op == "cut":
            kind = "cut"
        p.marks.append(_Mark(col, w, kind, label, title))

    def _roll_back(self, claimed: list[_Bar], ended: list[_Bar], col: int) -> None:
        """Undo a transaction: its claims are dropped, its completions and failures undone."""
        for b in ended:
            if b.end_why in ("complete", "fail") and b.end_col is not None:
                b.voided.add(b.end_col)
                b.end_col, b.end_why = None, ""
                self.open.setdefault(b.worker, []).append(b)
        for b in claimed:
            if b.end_col is None:
                self._end(b, col, "rolled back")


def _order(lanes: list[str]) -> list[str]:
    """Workers by first appearance, each replacement (`w1.2`) right after the one it replaces."""
    bases: list[str] = []
    for lane in lanes:
        base = lane.split(".")[0]
        if base not in bases:
            bases.append(base)

    def key(lane: str) -> tuple[int, int, str]:
        base, _, gen = lane.partition(".")
        return bases.index(base), int(gen) if gen.isdigit() else 0, lane

    return sorted(lanes, key=key)


class _Axis:
    """Maps simulated time and history columns to x."""

    def __init__(self, cols: list[Event], second: int) -> None:
        self.second = second
        self.col_x: list[float] = []
        self.instants: list[tuple[float, float, float]] = []  # (time, first x, last x)
        x = float(_LEFT + _STEP)
        last: float | None = None
        for e in cols:
            at = e.at if last is None else max(e.at, last)
            if last is not None:
                x += self._gap(at - last) if at > last else _STEP
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
        return _GAP_MIN + _GAP_LOG * math.log2(1 + dt / self.second)

    def at(self, t: float) -> float:
        """Return x for time `t`: just before its instant's events, or between instants."""
        for i, (ti, first, _) in enumerate(self.instants):
            if t <= ti:
                if i == 0 or t == ti:
                    return first - _STEP / 2 if t == ti else first - self._gap(ti - t)
                tp, _, lastp = self.instants[i - 1]
                return lastp + (first - lastp) * (t - tp) / (ti - tp)
        tl, _, lastl = self.instants[-1]
        return lastl + self._gap(t - tl)

    @property
    def end(self) -> float:
        return self.instants[-1][2]


def _highlight(p: _Parsed, violation: str) -> None:
    """Mark the bars the violation names: `worker:job#token`, else every bar of a named job."""
    refs = re.findall(r"([\w.\-]+):([^\s:#]+)#([^\s,;)]+)", violation)
    for worker, job, token in refs:
        same = [b for b in p.bars if b.job == job and b.token == token]
        for b in [b for b in same if b.worker == worker] or same:
            b.hot = True
    if not any(b.hot for b in p.bars):
        named = {j for j in p.jobs if re.search(rf"(?<![\w:]){re.escape(j)}(?![\w#])", violation)}
        for b in p.bars:
            b.hot = b.job in named


def _assign_rows(bars: list[_Bar], axis: _Axis, last_col: int) -> int:
    """Stack bars that overlap in one lane into rows; return the number of rows used."""
    rows: list[float] = []
    for b in sorted(bars, key=lambda b: b.col):
        start = axis.col_x[b.wait_col if b.wait_col is not None else b.col] - 4
        stop = max(_bar_stop(b, axis, last_col), start + 8 + len(b.job) * _CHAR * 2)
        for i, busy in enumerate(rows):
            if busy < start:
                b.row, rows[i] = i, stop
                break
        else:
            b.row = len(rows)
            rows.append(stop)
    return max(1, len(rows))


def _ghost(b: _Bar) -> bool:
    """Whether the lease outlives the bar: dropped without release (crash, rejection)."""
    released = b.end_why in ("complete", "fail") and any(
        col == b.end_col and accepted for col, _, accepted in b.marks
    )
    return b.end_col is not None and b.end_why != "rolled back" and not released


def _bar_stop(b: _Bar, axis: _Axis, last_col: int) -> float:
    solid = axis.at(b.lease_end)
    if _ghost(b):
        return max(solid, axis.col_x[b.end_col or 0]) + 8
    if b.end_col is not None:
        return max(solid if solid < axis.col_x[b.end_col] else 0, axis.col_x[b.end_col]) + 8
    return max(solid, axis.col_x[last_col]) + 8


class _Svg:
    """Collects SVG elements; every text goes through `escape`.

    It also keeps the estimated right end of every text, so the picture's width can
    be chosen after the texts are placed and none of them is clipped.
    """

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.right = 0.0

    def add(
        self, tag: str, text: str | None = None, title: str | None = None, **attrs: Any
    ) -> None:
        a = " ".join(
            f"{k.rstrip('_').replace('_', '-')}={quoteattr(str(v))}"
            for k, v in attrs.items()
            if v is not None
        )
        inner = f"<title>{escape(title)}</title>" if title else ""
        if text is not None:
            inner += escape(text)
            if tag == "text":
                size = float(attrs.get("font_size", 9.5))
                bold = attrs.get("font_weight") == "bold"
                x = float(attrs.get("x", 0)) + _text_width(text, size, bold)
                self.right = max(self.right, x)
        self.parts.append(f"<{tag} {a}>{inner}</{tag}>" if inner else f"<{tag} {a}/>")

    def text(self, x: float, y: float, s: str, size: float = 9.5, **attrs: Any) -> None:
        self.add("text", s, x=f"{x:.1f}", y=f"{y:.1f}", font_size=size, **attrs)


def render_svg(
    history: History, judge: Judge, violation: str | None, prop: str | None, second: int
) -> str:
    """Return the history as an SVG document (a string), leases as `judge` judged them."""
    lease = judge.rules.lease
    p = _parse(history, judge)
    if violation:
        _highlight(p, violation)
    axis = _Axis(p.cols, second)
    last_col = max(len(p.cols) - 1, 0)
    lanes = _order(p.lanes)
    right = max([axis.end + 2 * _STEP] + [axis.at(b.lease_end) + 2 * _STEP for b in p.bars])
    svg = _Svg()
    y = 22.0
    title = f"leasecheck: {prop} violated" if prop else "leasecheck history"
    svg.text(12, y, title, size=15, font_weight="bold", fill=_RED if prop else _INK)
    y += 16
    sub = (
        f"one lane per worker; simulated time → (one column per event; gaps between "
        f"instants grow with elapsed time, log scale); lease {lease / second:g}s"
    )
    svg.text(12, y, sub, size=10, fill="#555")
    y += 14
    axis_y = y + 12
    body_top = axis_y + 8
    strip_h = _STRIP_ROW * len(STRIP) + 2.0
    lane_tops: dict[str, float] = {}
    lane_rows: dict[str, int] = {}
    yy = body_top + strip_h
    for lane in lanes:
        lane_rows[lane] = _assign_rows([b for b in p.bars if b.worker == lane], axis, last_col)
        lane_tops[lane] = yy
        yy += _LABELS * _LEVEL + lane_rows[lane] * _ROW + 10
    body_bottom = yy
    _defs(svg, p.jobs)
    _grid(svg, axis, axis_y, body_top, body_bottom, second, [b.lease_end for b in p.bars])
    # full-width shapes say 100%: the width is only known once every text is placed
    svg.add("rect", x=0, y=body_top, width="100%", height=strip_h, fill="#f7f7f7")
    strip_tops = {lane: body_top + i * _STRIP_ROW for i, lane in enumerate(STRIP)}
    for lane, top in strip_tops.items():
        if top > body_top:
            svg.add("line", x1=0, x2="100%", y1=top, y2=top, stroke="#e6e6e6")
        svg.text(8, top + 23.5, lane, size=9, fill="#555", class_="strip-lane")
    placer = _Placer()
    for m in (m for m in p.marks if m.lane in STRIP):
        x, top = axis.col_x[m.col], strip_tops[m.lane]
        colour = p.jobs.get(m.label[1:], "#555") if m.kind == "enqueue" else "#555"
        svg.add("circle", cx=f"{x:.1f}", cy=top + 21, r=3, fill=colour, title=m.title)
        level = placer.place(m.lane, x, m.label)
        if level is not None:
            svg.text(x + 5, top + 9 + level * 9, m.label, size=8.5, fill=colour)
    for lane in lanes:
        top = lane_tops[lane]
        bar_top = top + _LABELS * _LEVEL
        height = lane_rows[lane] * _ROW + 4
        svg.add("line", x1=0, x2="100%", y1=top - 3, y2=top - 3, stroke="#ccc")
        svg.text(8, bar_top + 12, lane, size=11, font_weight="bold", fill=_INK, class_="lane")
        for worker, start, stop, why in p.pauses:
            if worker != lane:
                continue
            x0 = axis.col_x[start]
            x1 = axis.col_x[stop] if stop is not None else axis.end + _STEP
            svg.add(
                "rect",
                x=f"{x0:.1f}",
                y=bar_top - 2,
                width=f"{x1 - x0:.1f}",
                height=height,
                fill="#e4e4e4",
                title=f"{lane} {why}: takes no steps, sends no heartbeats",
            )
        for b in (b for b in p.bars if b.worker == lane):
            tail = f"tail{list(p.jobs).index(b.job)}"
            _bar(svg, b, axis, bar_top + b.row * _ROW, p.jobs[b.job], tail, last_col, p.bars)
        for w, start, stop in p.waits:
            if w == lane:
                x0, x1 = axis.col_x[start], axis.col_x[stop]
                svg.add(
                    "line",
                    x1=f"{x0:.1f}",
                    x2=f"{x1:.1f}",
                    y1=bar_top + 6,
                    y2=bar_top + 6,
                    stroke="#555",
                    stroke_dasharray="3 2",
                )
        for m in (m for m in p.marks if m.lane == lane):
            _lane_mark(svg, m, axis.col_x[m.col], top, bar_top, height, placer)
    if prop:
        vx = axis.end + _STEP * 0.6
        svg.add(
            "line",
            x1=f"{vx:.1f}",
            x2=f"{vx:.1f}",
            y1=axis_y - 4,
            y2=body_bottom,
            stroke=_RED,
            stroke_width=2,
            stroke_dasharray="6 3",
        )
        svg.text(vx + 4, body_bottom - 4, f"✗ {prop}", size=10, fill=_RED, font_weight="bold")
    width = max(right + 20, svg.right + _MARGIN, 760.0)
    y = _legend(
        svg, body_bottom + 14, width, {op.split(":")[0] for b in p.bars for _, op, _ in b.marks}
    )
    if violation or prop:
        y = _caption(svg, y + 8, width, violation or "", prop)
    width = max(width, svg.right + _MARGIN)  # the caption wraps to the width; its head does not
    head = (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{y + 10:.0f}' "
        f"viewBox='0 0 {width:.0f} {y + 10:.0f}' {_FONT}>"
        f"<rect width='100%' height='100%' fill='white'/>"
    )
    return "\n".join(["<?xml version='1.0' encoding='UTF-8'?>", head, *svg.parts, "</svg>"]) + "\n"


class _Placer:
    """Puts short labels on the first free level of a lane so they do not overlap."""

    def __init__(self) -> None:
        self.ends: dict[tuple[str, int], float] = {}

    def place(self, lane: str, x: float, label: str, levels: int = _LABELS) -> int | None:
        for level in range(levels):
            if self.ends.get((lane, level), -1e9) < x - 6:
                self.ends[(lane, level)] = x + 6 + len(label) * _CHAR
                return level
        return None


def _defs(svg: _Svg, jobs: dict[str, str]) -> None:
    svg.parts.append(
        "<defs>"
        + "".join(
            f"<pattern id='tail{i}' width='6' height='6' patternUnits='userSpaceOnUse' "
            f"patternTransform='rotate(45)'><rect width='6' height='6' fill='white'/>"
            f"<line x1='0' y1='0' x2='0' y2='6' stroke='{colour}' stroke-width='2.5'/></pattern>"
            for i, colour in enumerate(list(jobs.values()) or [_PALETTE[0]])
        )
        + "</defs>"
    )


def _grid(
    svg: _Svg,
    axis: _Axis,
    axis_y: float,
    top: float,
    bottom: float,
    second: int,
    later: list[int],
) -> None:
    """Shade each instant's columns and label the instants (and later lease ends) on top."""
    label_end = -1e9
    stop = max([axis.end + _STEP, *(axis.at(t) for t in later)])
    svg.add("line", x1=_LEFT, x2=f"{stop:.0f}", y1=axis_y, y2=axis_y, stroke="#999")
    ticks: list[tuple[float, str]] = []
    for i, (t, first, last) in enumerate(axis.instants):
        x0, x1 = first - _STEP / 2 + 2, last + _STEP / 2 - 2
        shade = "#f3f6fb" if i % 2 == 0 else "#fbfbf3"
        svg.add(
            "rect", x=f"{x0:.1f}", y=top, width=f"{x1 - x0:.1f}", height=bottom - top, fill=shade
        )
        ticks.append((x0, _time(t, second)))
    ticks += [
        (axis.at(t), _time(t, second)) for t in sorted(set(later)) if t > axis.instants[-1][0]
    ]
    for x, label in ticks:
        svg.add("line", x1=f"{x:.1f}", x2=f"{x:.1f}", y1=axis_y - 3, y2=axis_y + 3, stroke="#999")
        if x > label_end:
            svg.text(x, axis_y - 5, label, size=9, fill="#333")
            label_end = x + len(label) * 5.4 + 4


def _bar(
    svg: _Svg,
    b: _Bar,
    axis: _Axis,
    y: float,
    colour: str,
    tail: str,
    last_col: int,
    bars: list[_Bar],
) -> None:
    """Draw one claim: solid lease, hatched tail past it, its marks, its label."""
    x0 = axis.col_x[b.col]
    lease_x = axis.at(b.lease_end)
    end_x = axis.col_x[b.end_col] if b.end_col is not None else None
    solid = min(lease_x, end_x) if end_x is not None else lease_x
    solid = max(solid, x0 + 3)
    what = f"{b.worker} holds {b.job} (token {b.token})"
    outline = {"stroke": _RED, "stroke_width": 2.5} if b.hot else {"stroke": "none"}
    svg.add(
        "rect",
        x=f"{x0:.1f}",
        y=y + 1,
        width=f"{solid - x0:.1f}",
        height=12,
        rx=2,
        fill=colour,
        fill_opacity=0.85,
        title=f"{what}: lease",
        class_="lease",
        data_worker=b.worker,
        data_job=b.job,
        data_token=b.token,
        data_lease_end=b.lease_end,
        data_ended=b.end_why or None,
        data_hot="yes" if b.hot else None,
        **outline,
    )
    tail_to = end_x if end_x is not None else axis.col_x[last_col]
    if tail_to > solid + 1:
        _tail(svg, solid, tail_to, y, colour, tail, f"{what} after its lease ran out")
    for lapsed, col in b.lapses:  # a lapse the worker did not notice, drawn over the lease
        lx, rx = axis.at(lapsed), axis.col_x[col]
        if rx > lx + 1:
            _tail(
                svg, lx, rx, y, colour, tail, f"{what}: lease lapsed, then a heartbeat revived it"
            )
    if _ghost(b) and end_x is not None and lease_x > end_x + 1:
        svg.add(
            "rect",
            x=f"{end_x:.1f}",
            y=y + 1,
            width=f"{lease_x - end_x:.1f}",
            height=12,
            rx=2,
            fill="none",
            stroke=colour,
            stroke_width=1.2,
            stroke_dasharray="4 3",
            title=f"{b.job} (token {b.token}): lease still unexpired, held by nobody",
        )
    if b.wait_col is not None:
        wx = axis.col_x[b.wait_col]
        svg.add(
            "line",
            x1=f"{wx:.1f}",
            x2=f"{x0:.1f}",
            y1=y + 7,
            y2=y + 7,
            stroke="#555",
            stroke_dasharray="3 2",
            title=f"{b.worker}'s claim waits on a lock",
        )
    if b.end_why in ("crash", "rolled back") and end_x is not None:
        svg.add(
            "line",
            x1=f"{end_x:.1f}",
            x2=f"{end_x:.1f}",
            y1=y - 1,
            y2=y + 15,
            stroke=_INK,
            stroke_width=2,
            title=f"{b.job} dropped: {b.end_why}",
        )
    rivals = [o.col for o in bars if o is not b and o.job == b.job and o.worker != b.worker]
    for col, op, accepted in b.marks:
        x = axis.col_x[col]
        stale = b.hot and accepted and any(b.col < c < col for c in rivals)
        _bar_mark(
            svg,
            x,
            y,
            op,
            accepted,
            stale or (b.hot and accepted and op == "complete"),
            col in b.voided,
            tag=True,
        )
    svg.text(
        x0 + 2,
        y + 10.5,
        f"{b.job} #{b.token}",
        size=9,
        font_weight="bold",
        fill=_INK,
        stroke="white",
        stroke_width=2.5,
        paint_order="stroke",
        class_="job-label",
    )


def _tail(svg: _Svg, x0: float, x1: float, y: float, colour: str, tail: str, title: str) -> None:
    """Draw the hatched stretch where a worker holds a job whose lease has run out."""
    svg.add("rect", x=f"{x0:.1f}", y=y + 1, width=f"{x1 - x0:.1f}", height=12, fill="white")
    svg.add(
        "rect",
        x=f"{x0:.1f}",
        y=y + 3,
        width=f"{x1 - x0:.1f}",
        height=8,
        fill=f"url(#{tail})",
        stroke=colour,
        stroke_width=0.8,
        title=title,
        class_="lapsed",
    )


def _bar_mark(
    svg: _Svg,
    x: float,
    y: float,
    op: str,
    accepted: bool,
    hot: bool,
    void: bool,
    *,
    tag: bool = False,
) -> None:
    """Draw a heartbeat tick, a completion or failure disc, or a sent effect, on a bar.

    With `tag`, the mark carries a class (`complete accepted`, `heartbeat rejected`, ...)
    so tools and tests can read the picture; legend samples carry none.
    """
    cy = y + 7
    name, _, kind = op.partition(":")
    outcome = kind or ("accepted" if accepted else "rejected")
    cls = f"{name} {outcome}" + (" voided" if void else "") if tag else None
    title = f"{name} {'accepted' if accepted else 'rejected'}" + (f" ({kind})" if kind else "")
    if void:
        title += ", then rolled back"
    if hot:
        svg.add(
            "circle",
            cx=f"{x:.1f}",
            cy=cy,
            r=10,
            fill="none",
            stroke=_RED,
            stroke_width=2.5,
            class_="offending" if tag else None,
        )
    if name == "heartbeat":
        colour = _OK if accepted else _RED
        svg.add(
            "line",
            x1=f"{x:.1f}",
            x2=f"{x:.1f}",
            y1=y - 2,
            y2=y + 16,
            stroke=colour,
            stroke_width=2.5,
            title=title,
            class_=cls,
        )
    elif name == "complete":
        if kind:
            svg.add(
                "circle",
                cx=f"{x:.1f}",
                cy=cy,
                r=6,
                fill="#fff3cd",
                stroke="#b8860b",
                title=title,
                class_=cls,
            )
            svg.text(x - 2.5, cy + 3.5, "?", size=9, fill="#b8860b", font_weight="bold")
        elif accepted:
            svg.add(
                "circle",
                cx=f"{x:.1f}",
                cy=cy,
                r=6.5,
                fill=_OK,
                stroke="white",
                stroke_dasharray="2 1.5" if void else None,
                title=title,
                class_=cls,
            )
            svg.add(
                "path",
                d=f"M{x - 3:.1f},{cy:.1f} l2,2.5 l4,-5",
                stroke="white",
                stroke_width=1.8,
                fill="none",
            )
        else:
            svg.add(
                "circle",
                cx=f"{x:.1f}",
                cy=cy,
                r=6,
                fill=_GREY,
                stroke=_RED,
                stroke_width=1.5,
                title=title,
                class_=cls,
            )
            svg.add(
                "path",
                d=f"M{x - 2.5:.1f},{cy - 2.5:.1f} l5,5 m0,-5 l-5,5",
                stroke=_RED,
                stroke_width=1.5,
            )
    elif name == "fail":
        d = f"M{x:.1f},{cy - 7:.1f} l6,7 l-6,7 l-6,-7 z"
        svg.add(
            "path",
            d=d,
            fill="#f28e2b" if accepted else _GREY,
            stroke=_RED if not accepted else "white",
            title=title,
            class_=cls,
        )
    else:  # a sent effect: an envelope, filled when the receiver took it
        svg.add(
            "rect",
            x=f"{x - 5:.1f}",
            y=cy - 4,
            width=10,
            height=8,
            fill="#1565c0" if accepted else _GREY,
            stroke="white",
            title=title,
            class_=cls,
        )


def _lane_mark(
    svg: _Svg, m: _Mark, x: float, top: float, bar_top: float, height: float, placer: _Placer
) -> None:
    """Draw a worker event (pause, crash, cut, transaction, blocked call) and its label.

    The icon and its label sit above the lane's bars; a crash also crosses the bars.
    """
    colour = {"crash": _RED, "cut": "#b8860b", "blocked": "#555", "cancel": "#555"}.get(
        m.kind, "#444"
    )
    level = placer.place(str(top), x, m.label)
    cy = top + 5 + (level or 0) * _LEVEL
    if m.kind == "crash":
        d = f"M{x - 5:.1f},{bar_top:.1f} l10,10 m0,-10 l-10,10"
        svg.add("path", d=d, stroke=_RED, stroke_width=3, title=m.title)
    elif m.kind == "pause":
        for dx in (-3.5, 1):
            svg.add(
                "rect", x=f"{x + dx:.1f}", y=cy - 4, width=2.5, height=8, fill="#444", title=m.title
            )
    elif m.kind == "resume":
        d = f"M{x - 3:.1f},{cy - 4:.1f} l7,4 l-7,4 z"
        svg.add("path", d=d, fill="#444", title=m.title)
    elif m.kind == "cut":
        d = f"M{x + 2:.1f},{cy - 5:.1f} l-4,5 l4,0 l-4,5"
        svg.add("path", d=d, stroke=colour, stroke_width=2, fill="none", title=m.title)
    elif m.kind == "txn":
        svg.add(
            "line",
            x1=f"{x:.1f}",
            x2=f"{x:.1f}",
            y1=cy - 4,
            y2=bar_top + height - 4,
            stroke="#777",
            stroke_dasharray="2 2",
            title=m.title,
        )
    else:
        svg.add(
            "circle",
            cx=f"{x:.1f}",
            cy=f"{cy:.1f}",
            r=3,
            fill="white",
            stroke=colour,
            stroke_width=1.5,
            title=m.title,
        )
    if level is not None:
        svg.text(x + 5, cy + 3.5, m.label, size=9, fill=colour)


def _legend(svg: _Svg, y: float, width: float, present: set[str]) -> float:
    """Explain every kind of mark; failure and effect marks only when the picture has them."""
    svg.text(12, y + 4, "legend", size=10, font_weight="bold", fill=_INK)
    x = 70.0
    items: list[tuple[str, str]] = [
        ("lease (claim → lease end)", "bar"),
        ("held after the lease ran out", "tail"),
        ("heartbeat accepted / refused", "beat"),
        ("completion accepted", "ok"),
        ("completion rejected", "no"),
        ("lease unexpired, held by nobody", "ghost"),
        ("paused", "pause"),
        ("waits on a lock", "wait"),
        ("crash", "crash"),
        ("named in the violation", "hot"),
    ]
    if "fail" in present:
        items.insert(5, ("failure report accepted / rejected", "fail"))
    if "send" in present:
        items.insert(5, ("effect sent / deduplicated", "send"))
    for label, kind in items:
        need = 30 + _text_width(label) + 14
        if x + need > width - 10:
            x, y = 70.0, y + 18
        if kind == "bar":
            svg.add("rect", x=x, y=y - 4, width=24, height=10, rx=2, fill=_PALETTE[0])
        elif kind == "tail":
            svg.add(
                "rect",
                x=x,
                y=y - 3,
                width=24,
                height=8,
                fill="url(#tail0)",
                stroke=_PALETTE[0],
                stroke_width=0.8,
            )
        elif kind == "beat":
            svg.add("line", x1=x + 8, x2=x + 8, y1=y - 6, y2=y + 8, stroke=_OK, stroke_width=2.5)
            svg.add("line", x1=x + 16, x2=x + 16, y1=y - 6, y2=y + 8, stroke=_RED, stroke_width=2.5)
        elif kind in ("ok", "no"):
            _bar_mark(svg, x + 12, y - 6, "complete", kind == "ok", False, False)
        elif kind in ("fail", "send"):
            _bar_mark(svg, x + 6, y - 6, kind, True, False, False)
            _bar_mark(svg, x + 20, y - 6, kind, False, False, False)
        elif kind == "ghost":
            svg.add(
                "rect",
                x=x,
                y=y - 4,
                width=24,
                height=10,
                rx=2,
                fill="none",
                stroke=_PALETTE[0],
                stroke_width=1.2,
                stroke_dasharray="4 3",
            )
        elif kind == "wait":
            svg.add(
                "line", x1=x, x2=x + 24, y1=y + 1, y2=y + 1, stroke="#555", stroke_dasharray="3 2"
            )
        elif kind == "pause":
            svg.add("rect", x=x, y=y - 5, width=24, height=12, fill="#e4e4e4")
        elif kind == "crash":
            svg.add(
                "path", d=f"M{x + 7},{y - 4} l10,10 m0,-10 l-10,10", stroke=_RED, stroke_width=3
            )
        else:
            svg.add(
                "rect",
                x=x,
                y=y - 4,
                width=24,
                height=10,
                rx=2,
                fill="white",
                stroke=_RED,
                stroke_width=2.5,
            )
        svg.text(x + 30, y + 4, label, size=9.5, fill=_INK)
        x += need
    return y + 14


def _wrap(line: str, width: int) -> list[str]:
    out: list[str] = []
    while len(line) > width:
        cut = line.rfind(" ", 0, width)
        cut = cut if cut > 20 else width
        out.append(line[:cut])
        line = "    " + line[cut:].lstrip()
    return [*out, line]


def _caption(svg: _Svg, y: float, width: float, violation: str, prop: str | None) -> float:
    """The violation in a red box: the property, what it promises, and what went wrong."""
    chars = max(40, int((width - 40) / 6.2))
    lines = [ln for raw in violation.splitlines() for ln in _wrap(raw, chars)]
    head = f"violated: {prop}" if prop else "violation"
    promise = DESCRIPTIONS.get(prop or "", "")
    height = 30 + 14 * len(lines) + (14 if promise else 0)
    svg.add(
        "rect",
        x=10,
        y=y,
        width=f"{width - 20:.0f}",
        height=height,
        rx=4,
        fill="#fdecea",
        stroke=_RED,
        stroke_width=1.5,
        class_="violation",
        data_property=prop,
    )
    svg.text(20, y + 18, head, size=12, font_weight="bold", fill=_RED, class_="violation-title")
    yy = y + 18
    if promise:
        yy += 14
        svg.text(20, yy, f"the property: {promise}", size=10, fill="#555", font_style="italic")
    for line in lines:
        yy += 14
        svg.add(
            "text",
            line,
            x=20,
            y=f"{yy:.1f}",
            font_size=10,
            fill=_INK,
            font_family="DejaVu Sans Mono, monospace",
            style="white-space:pre",
            class_="violation-text",
        )
    return y + height


def load(path: Path) -> tuple[History, Judge, str | None, str | None]:
    """Read a history file the recorder wrote; return the history, the judge that judged
    its saved facts again, the violation and the property."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        raise ValueError("not a leasecheck history: expected a JSON object with a 'history' list")
    if not isinstance(data.get("judge"), dict):
        raise ValueError(
            "it has no judge's facts (written by an older leasecheck); replay its "
            "program with `leasecheck replay` to get a file that has them"
        )
    names = {f.name for f in fields(Event)}
    events = [Event(**{k: v for k, v in e.items() if k in names}) for e in data["history"]]
    judge = rejudge(data["judge"])
    return History(events=events), judge, data.get("violation"), data.get("property")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("history", type=Path, help="a .leasecheck/*.json file a failing run left")
    parser.add_argument("-o", "--out", type=Path, help="where to write (default: HISTORY.svg)")
    args = parser.parse_args(argv)
    try:
        history, judge, violation, prop = load(args.history)
    except (OSError, ValueError, TypeError) as exc:
        print(f"leasecheck svg: {args.history}: {exc}", file=sys.stderr)
        return 2
    out = args.out or args.history.with_suffix(".svg")
    out.write_text(render_svg(history, judge, violation, prop, SECOND), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
