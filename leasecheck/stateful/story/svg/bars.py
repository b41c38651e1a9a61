"""One claim drawn as a bar: its lease, the tail past it, its marks and its label."""

from __future__ import annotations

from leasecheck.stateful.story.svg.axis import Axis
from leasecheck.stateful.story.svg.doc import Svg
from leasecheck.stateful.story.svg.marks import bar_mark
from leasecheck.stateful.story.svg.reading import Bar
from leasecheck.stateful.story.svg.style import CHAR, INK, RED, text_width


def assign_rows(bars: list[Bar], axis: Axis, last_col: int) -> int:
    """Stack bars that overlap in one lane into rows; return the number of rows used."""
    rows: list[float] = []
    for b in sorted(bars, key=lambda b: b.col):
        start = axis.col_x[b.wait_col if b.wait_col is not None else b.col] - 4
        label = max(len(b.job) * CHAR * 2, text_width(b.label, 9, bold=True) + 6)
        stop = max(bar_stop(b, axis, last_col), start + 8 + label)
        for i, busy in enumerate(rows):
            if busy < start:
                b.row, rows[i] = i, stop
                break
        else:
            b.row = len(rows)
            rows.append(stop)
    return max(1, len(rows))


def ghost(b: Bar) -> bool:
    """Whether the lease outlives the bar: dropped without release (crash, rejection)."""
    released = b.end_why in ("complete", "fail") and any(
        col == b.end_col and accepted for col, _, accepted in b.marks
    )
    return b.end_col is not None and b.end_why != "rolled back" and not released


def bar_stop(b: Bar, axis: Axis, last_col: int) -> float:
    """Where the bar's drawing ends on the right, its ghost or tail included."""
    solid = axis.at(b.lease_end)
    if ghost(b):
        return max(solid, axis.col_x[b.end_col or 0]) + 8
    if b.end_col is not None:
        return max(solid if solid < axis.col_x[b.end_col] else 0, axis.col_x[b.end_col]) + 8
    return max(solid, axis.col_x[last_col]) + 8


def bar(
    svg: Svg,
    b: Bar,
    axis: Axis,
    y: float,
    colour: str,
    tail: str,
    last_col: int,
    bars: list[Bar],
) -> None:
    """Draw one claim: solid lease, hatched tail past it, its marks, its label."""
    x0 = axis.col_x[b.col]
    lease_x = axis.at(b.lease_end)
    end_x = axis.col_x[b.end_col] if b.end_col is not None else None
    solid = min(lease_x, end_x) if end_x is not None else lease_x
    solid = max(solid, x0 + 3)
    what = f"{b.worker} holds {b.job} (token {b.token})"
    outline = {"stroke": RED, "stroke_width": 2.5} if b.hot else {"stroke": "none"}
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
        data_ref=b.ref,
        data_lease_end=b.lease_end,
        data_ended=b.end_why or None,
        data_hot="yes" if b.hot else None,
        **outline,
    )
    tail_to = end_x if end_x is not None else axis.col_x[last_col]
    if tail_to > solid + 1:
        tail_rect(svg, solid, tail_to, y, colour, tail, f"{what} after its lease ran out")
    for lapsed, col in b.lapses:  # a lapse the worker did not notice, drawn over the lease
        lx, rx = axis.at(lapsed), axis.col_x[col]
        if rx > lx + 1:
            tail_rect(
                svg, lx, rx, y, colour, tail, f"{what}: lease lapsed, then a heartbeat revived it"
            )
    if ghost(b) and end_x is not None and lease_x > end_x + 1:
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
            stroke=INK,
            stroke_width=2,
            title=f"{b.job} dropped: {b.end_why}",
        )
    rivals = [o.col for o in bars if o is not b and o.job == b.job and o.worker != b.worker]
    for col, op, accepted in b.marks:
        x = axis.col_x[col]
        stale = b.hot and accepted and any(b.col < c < col for c in rivals)
        bar_mark(
            svg,
            x,
            y,
            op,
            accepted,
            stale or (b.hot and accepted and op == "complete"),
            col in b.voided,
            tag=True,
        )
    # The halo is a copy of its own under the label, not `paint-order`, which many
    # converters (and older viewers) ignore, painting the white stroke over the text.
    for cls, paint in (("job-halo", {"stroke": "white", "stroke_width": 2.5}), ("job-label", {})):
        fill = "white" if paint else INK
        svg.text(
            x0 + 2, y + 10.5, b.label, size=9, font_weight="bold", fill=fill, class_=cls, **paint
        )


def tail_rect(svg: Svg, x0: float, x1: float, y: float, colour: str, tail: str, title: str) -> None:
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
