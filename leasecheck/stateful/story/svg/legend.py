"""What the marks mean, and the violation in words, below the lanes."""

from __future__ import annotations

from leasecheck.stateful.properties import DESCRIPTIONS
from leasecheck.stateful.story.svg.doc import Svg
from leasecheck.stateful.story.svg.marks import bar_mark
from leasecheck.stateful.story.svg.style import INK, OK, PALETTE, RED, text_width


def legend(svg: Svg, y: float, width: float, present: set[str]) -> float:
    """Explain every kind of mark; the rarer ones only when the picture has them.

    `present`: the ops of the marks drawn (`fail`, `heartbeat:sent`, ...), and `cut`
    when the time axis skips an idle stretch.
    """
    svg.text(12, y + 4, "legend", size=10, font_weight="bold", fill=INK)
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
    if "heartbeat:sent" in present:
        items.insert(3, ("heartbeat sent (answers nothing)", "sent"))
    if "cut" in present:
        items.append(("no event for a while: cut short", "cut"))
    for label, kind in items:
        need = 30 + text_width(label) + 14
        if x + need > width - 10:
            x, y = 70.0, y + 18
        if kind == "bar":
            svg.add("rect", x=x, y=y - 4, width=24, height=10, rx=2, fill=PALETTE[0])
        elif kind == "tail":
            svg.add(
                "rect",
                x=x,
                y=y - 3,
                width=24,
                height=8,
                fill="url(#tail0)",
                stroke=PALETTE[0],
                stroke_width=0.8,
            )
        elif kind == "beat":
            svg.add("line", x1=x + 8, x2=x + 8, y1=y - 6, y2=y + 8, stroke=OK, stroke_width=2.5)
            svg.add("line", x1=x + 16, x2=x + 16, y1=y - 6, y2=y + 8, stroke=RED, stroke_width=2.5)
        elif kind == "sent":
            bar_mark(svg, x + 12, y - 6, "heartbeat:sent", False, False, False)
        elif kind == "cut":
            for dx in (8, 14):
                svg.add("path", d=f"M{x + dx},{y + 7} l4,-12", stroke="#777", stroke_width=1.5)
        elif kind in ("ok", "no"):
            bar_mark(svg, x + 12, y - 6, "complete", kind == "ok", False, False)
        elif kind in ("fail", "send"):
            bar_mark(svg, x + 6, y - 6, kind, True, False, False)
            bar_mark(svg, x + 20, y - 6, kind, False, False, False)
        elif kind == "ghost":
            svg.add(
                "rect",
                x=x,
                y=y - 4,
                width=24,
                height=10,
                rx=2,
                fill="none",
                stroke=PALETTE[0],
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
            svg.add("path", d=f"M{x + 7},{y - 4} l10,10 m0,-10 l-10,10", stroke=RED, stroke_width=3)
        else:
            svg.add(
                "rect",
                x=x,
                y=y - 4,
                width=24,
                height=10,
                rx=2,
                fill="white",
                stroke=RED,
                stroke_width=2.5,
            )
        svg.text(x + 30, y + 4, label, size=9.5, fill=INK)
        x += need
    return y + 14


def wrap(line: str, width: int) -> list[str]:
    out: list[str] = []
    while len(line) > width:
        cut = line.rfind(" ", 0, width)
        cut = cut if cut > 20 else width
        out.append(line[:cut])
        line = "    " + line[cut:].lstrip()
    return [*out, line]


def caption(svg: Svg, y: float, width: float, violation: str, prop: str | None) -> float:
    """The violation in a red box: the property, what it promises, and what went wrong."""
    chars = max(40, int((width - 40) / 6.2))
    lines = [ln for raw in violation.splitlines() for ln in wrap(raw, chars)]
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
        stroke=RED,
        stroke_width=1.5,
        class_="violation",
        data_property=prop,
    )
    svg.text(20, y + 18, head, size=12, font_weight="bold", fill=RED, class_="violation-title")
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
            fill=INK,
            font_family="DejaVu Sans Mono, monospace",
            style="white-space:pre",
            class_="violation-text",
        )
    return y + height
