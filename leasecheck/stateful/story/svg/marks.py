"""Marks on a bar (heartbeat, completion, failure, sent effect) and on a lane (events)."""

from __future__ import annotations

from leasecheck.stateful.story.svg.doc import Placer, Svg
from leasecheck.stateful.story.svg.reading import Mark
from leasecheck.stateful.story.svg.style import GREY, LEVEL, OK, RED, SENT


def bar_mark(
    svg: Svg,
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

    `op` is the call, with `:kind` when the answer is not a plain yes or no: `fail` (an
    error), `info` (unknown: the connection died), `sent` (a heartbeat that answers
    nothing). With `tag`, the mark carries a class (`complete accepted`, `heartbeat sent`, ...)
    so tools and tests can read the picture; legend samples carry none.
    """
    cy = y + 7
    name, _, kind = op.partition(":")
    outcome = kind or ("accepted" if accepted else "rejected")
    cls = f"{name} {outcome}" + (" voided" if void else "") if tag else None
    title = f"{name} {'accepted' if accepted else 'rejected'}" + (f" ({kind})" if kind else "")
    if kind == "sent":
        title = f"{name} sent (fire and forget: it answers nothing, and nothing is judged)"
    if void:
        title += ", then rolled back"
    if hot:
        svg.add(
            "circle",
            cx=f"{x:.1f}",
            cy=cy,
            r=10,
            fill="none",
            stroke=RED,
            stroke_width=2.5,
            class_="offending" if tag else None,
        )
    if name == "heartbeat":
        colour = SENT if kind == "sent" else OK if accepted else RED
        svg.add(
            "line",
            x1=f"{x:.1f}",
            x2=f"{x:.1f}",
            y1=y - 2,
            y2=y + 16,
            stroke=colour,
            stroke_width=2.5,
            stroke_dasharray="3 2" if kind == "sent" else None,
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
                fill=OK,
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
                fill=GREY,
                stroke=RED,
                stroke_width=1.5,
                title=title,
                class_=cls,
            )
            svg.add(
                "path",
                d=f"M{x - 2.5:.1f},{cy - 2.5:.1f} l5,5 m0,-5 l-5,5",
                stroke=RED,
                stroke_width=1.5,
            )
    elif name == "fail":
        d = f"M{x:.1f},{cy - 7:.1f} l6,7 l-6,7 l-6,-7 z"
        svg.add(
            "path",
            d=d,
            fill="#f28e2b" if accepted else GREY,
            stroke=RED if not accepted else "white",
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
            fill="#1565c0" if accepted else GREY,
            stroke="white",
            title=title,
            class_=cls,
        )


def lane_mark(
    svg: Svg, m: Mark, x: float, top: float, bar_top: float, height: float, placer: Placer
) -> None:
    """Draw a worker event (pause, crash, cut, transaction, blocked call) and its label.

    The icon and its label sit above the lane's bars; a crash also crosses the bars.
    """
    colour = {"crash": RED, "cut": "#b8860b", "blocked": "#555", "cancel": "#555"}.get(
        m.kind, "#444"
    )
    level = placer.place(str(top), x, m.label)
    cy = top + 5 + (level or 0) * LEVEL
    if m.kind == "crash":
        d = f"M{x - 5:.1f},{bar_top:.1f} l10,10 m0,-10 l-10,10"
        svg.add("path", d=d, stroke=RED, stroke_width=3, title=m.title)
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
