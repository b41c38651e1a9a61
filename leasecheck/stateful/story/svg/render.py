"""Lay the parts out and write the whole picture: title, axis, strip, lanes, legend, caption."""

from __future__ import annotations

from leasecheck.stateful.history import History
from leasecheck.stateful.story.svg.axis import IDLE, Axis, cut_over, grid
from leasecheck.stateful.story.svg.bars import assign_rows, bar, ghost
from leasecheck.stateful.story.svg.doc import Placer, Svg, defs
from leasecheck.stateful.story.svg.evidence import Refs, highlight, refs_in_words
from leasecheck.stateful.story.svg.legend import caption, legend
from leasecheck.stateful.story.svg.marks import lane_mark
from leasecheck.stateful.story.svg.reading import (
    STRIP,
    Bar,
    Parsed,
    answers_heartbeats,
    order,
    parse,
)
from leasecheck.stateful.story.svg.style import (
    FONT,
    INK,
    LABELS,
    LEVEL,
    MARGIN,
    RED,
    ROW,
    STEP,
    STRIP_ROW,
)
from leasecheck.stateful.verdict.judge import Judge


def render_svg(
    history: History,
    judge: Judge,
    violation: str | None,
    prop: str | None,
    second: int,
    *,
    refs: Refs | None = None,
    heartbeat_answers: bool | None = None,
) -> str:
    """Return the history as an SVG document (a string), leases as `judge` judged them.

    `refs`: the claims and jobs the violation names (the failure file's
    `violation_refs`); without them, the violation's words are searched for names.
    `heartbeat_answers`: False for a fire-and-forget heartbeat, drawn as sent; without
    it, the judge's rules say, else the history is read for it.
    """
    if heartbeat_answers is None:
        heartbeat_answers = getattr(judge.rules, "heartbeat_answers", None)
    if heartbeat_answers is None:
        heartbeat_answers = answers_heartbeats(history, judge)
    lease = judge.rules.lease
    p = parse(history, judge, heartbeat_answers=heartbeat_answers)
    if refs is None and violation:
        refs = refs_in_words(p, violation)
    if refs is not None:
        highlight(p, refs)
    # lease ends the picture shows (not those of claims released before them): drawn to scale
    keep = [b.lease_end for b in p.bars if b.end_col is None or ghost(b) or _late(p, b)]
    keep += [ended for b in p.bars for ended, _ in b.lapses]
    axis = Axis(p.cols, second, lease, keep)
    last_col = max(len(p.cols) - 1, 0)
    lanes = order(p.lanes)
    right = max([axis.end + 2 * STEP] + [axis.at(b.lease_end) + 2 * STEP for b in p.bars])
    svg = Svg()
    y = 22.0
    title = f"leasecheck: {prop} violated" if prop else "leasecheck history"
    svg.text(12, y, title, size=15, font_weight="bold", fill=RED if prop else INK)
    y += 16
    sub = (
        f"one lane per worker; simulated time → (one column per event; gaps between "
        f"instants grow with elapsed time, log scale); lease {lease / second:g}s"
    )
    if axis.cuts:
        sub += f"; // a stretch of {IDLE} leases or more with no event, cut short"
    svg.text(12, y, sub, size=10, fill="#555")
    y += 14 + (10 if axis.cuts else 0)  # the cuts' lengths go above the time labels
    axis_y = y + 12
    body_top = axis_y + 8
    strip_h = STRIP_ROW * len(STRIP) + 2.0
    lane_tops: dict[str, float] = {}
    lane_rows: dict[str, int] = {}
    yy = body_top + strip_h
    for lane in lanes:
        lane_rows[lane] = assign_rows([b for b in p.bars if b.worker == lane], axis, last_col)
        lane_tops[lane] = yy
        yy += LABELS * LEVEL + lane_rows[lane] * ROW + 10
    body_bottom = yy
    defs(svg, p.jobs)
    grid(svg, axis, axis_y, body_top, body_bottom, second, [b.lease_end for b in p.bars])
    placer = Placer()
    _strip(svg, p, axis, body_top, strip_h, placer)
    for lane in lanes:
        _lane(svg, p, axis, lane, lane_tops[lane], lane_rows[lane], last_col)
    cut_over(svg, axis, body_top + strip_h, body_bottom, second)  # over the bars, under marks
    for lane in lanes:
        bar_top = lane_tops[lane] + LABELS * LEVEL
        for m in (m for m in p.marks if m.lane == lane):
            x, height = axis.col_x[m.col], lane_rows[lane] * ROW + 4
            lane_mark(svg, m, x, lane_tops[lane], bar_top, height, placer)
    if prop:
        vx = axis.end + STEP * 0.6
        svg.add(
            "line",
            x1=f"{vx:.1f}",
            x2=f"{vx:.1f}",
            y1=axis_y - 4,
            y2=body_bottom,
            stroke=RED,
            stroke_width=2,
            stroke_dasharray="6 3",
        )
        svg.text(vx + 4, body_bottom - 4, f"✗ {prop}", size=10, fill=RED, font_weight="bold")
    width = max(right + 20, svg.right + MARGIN, 760.0)
    present = {part for b in p.bars for _, op, _ in b.marks for part in (op, op.split(":")[0])}
    y = legend(svg, body_bottom + 14, width, present | ({"cut"} if axis.cuts else set()))
    if violation or prop:
        y = caption(svg, y + 8, width, violation or "", prop)
    width = max(width, svg.right + MARGIN)  # the caption wraps to the width; its head does not
    head = (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{y + 10:.0f}' "
        f"viewBox='0 0 {width:.0f} {y + 10:.0f}' {FONT}>"
        f"<rect width='100%' height='100%' fill='white'/>"
    )
    return "\n".join(["<?xml version='1.0' encoding='UTF-8'?>", head, *svg.parts, "</svg>"]) + "\n"


def _late(p: Parsed, b: Bar) -> bool:
    """Whether the claim ended after its lease: the picture shows a tail past the lease."""
    return b.end_col is not None and p.cols[b.end_col].at > b.lease_end


def _strip(svg: Svg, p: Parsed, axis: Axis, top: float, height: float, placer: Placer) -> None:
    """The thin rows at the top: enqueues (in their job's colour) and clock advances."""
    # full-width shapes say 100%: the width is only known once every text is placed
    svg.add("rect", x=0, y=top, width="100%", height=height, fill="#f7f7f7")
    strip_tops = {lane: top + i * STRIP_ROW for i, lane in enumerate(STRIP)}
    for lane, row_top in strip_tops.items():
        if row_top > top:
            svg.add("line", x1=0, x2="100%", y1=row_top, y2=row_top, stroke="#e6e6e6")
        svg.text(8, row_top + 23.5, lane, size=9, fill="#555", class_="strip-lane")
    for m in (m for m in p.marks if m.lane in STRIP):
        x, row_top = axis.col_x[m.col], strip_tops[m.lane]
        colour = p.jobs.get(m.label[1:], "#555") if m.kind == "enqueue" else "#555"
        svg.add("circle", cx=f"{x:.1f}", cy=row_top + 21, r=3, fill=colour, title=m.title)
        level = placer.place(m.lane, x, m.label)
        if level is not None:
            svg.text(x + 5, row_top + 9 + level * 9, m.label, size=8.5, fill=colour)


def _lane(
    svg: Svg,
    p: Parsed,
    axis: Axis,
    lane: str,
    top: float,
    rows: int,
    last_col: int,
) -> None:
    """One worker's lane: its name, pauses, bars and lock waits (its events come later)."""
    bar_top = top + LABELS * LEVEL
    height = rows * ROW + 4
    svg.add("line", x1=0, x2="100%", y1=top - 3, y2=top - 3, stroke="#ccc")
    svg.text(8, bar_top + 12, lane, size=11, font_weight="bold", fill=INK, class_="lane")
    for worker, start, stop, why in p.pauses:
        if worker != lane:
            continue
        x0 = axis.col_x[start]
        x1 = axis.col_x[stop] if stop is not None else axis.end + STEP
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
        bar(svg, b, axis, bar_top + b.row * ROW, p.jobs[b.job], tail, last_col, p.bars)
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
