"""The SVG document being written: escaped elements, label placement, hatch patterns."""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr

from leasecheck.stateful.story.svg.style import CHAR, LABELS, PALETTE, text_width


class Svg:
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
                x = float(attrs.get("x", 0)) + text_width(text, size, bold)
                if attrs.get("text_anchor") == "middle":
                    x -= text_width(text, size, bold) / 2
                self.right = max(self.right, x)
        self.parts.append(f"<{tag} {a}>{inner}</{tag}>" if inner else f"<{tag} {a}/>")

    def text(self, x: float, y: float, s: str, size: float = 9.5, **attrs: Any) -> None:
        self.add("text", s, x=f"{x:.1f}", y=f"{y:.1f}", font_size=size, **attrs)


class Placer:
    """Puts short labels on the first free level of a lane so they do not overlap."""

    def __init__(self) -> None:
        self.ends: dict[tuple[str, int], float] = {}

    def place(self, lane: str, x: float, label: str, levels: int = LABELS) -> int | None:
        for level in range(levels):
            if self.ends.get((lane, level), -1e9) < x - 6:
                self.ends[(lane, level)] = x + 6 + len(label) * CHAR
                return level
        return None


def defs(svg: Svg, jobs: dict[str, str]) -> None:
    """One hatch pattern per job colour (`tail0`, `tail1`, ...) for lapsed leases."""
    svg.parts.append(
        "<defs>"
        + "".join(
            f"<pattern id='tail{i}' width='6' height='6' patternUnits='userSpaceOnUse' "
            f"patternTransform='rotate(45)'><rect width='6' height='6' fill='white'/>"
            f"<line x1='0' y1='0' x2='0' y2='6' stroke='{colour}' stroke-width='2.5'/></pattern>"
            for i, colour in enumerate(list(jobs.values()) or [PALETTE[0]])
        )
        + "</defs>"
    )
