"""The picture's measures and colours, in one place so every part draws alike."""

from __future__ import annotations

PALETTE = ("#4e79a7", "#f28e2b", "#b07aa1", "#9c755f", "#76b7b2", "#d4a017", "#ff9da7", "#2f4b7c")
"""Job colours, in order of first appearance."""
OK, RED, GREY, INK = "#2e9e44", "#d32f2f", "#e6e6e6", "#222222"
SENT = "#888888"
"""A heartbeat that answers nothing: neither accepted (green) nor refused (red)."""
LEFT, STEP, GAP_MIN, GAP_LOG = 84, 26, 16, 36
"""Where time starts, one event column, and the gap between instants (min + log part)."""
ROW, LEVEL, LABELS = 18, 11, 2
"""A bar row's height, a label level's height, and label levels above a lane's bars."""
FONT = "font-family='DejaVu Sans, Verdana, sans-serif'"
CHAR = 5.6
"""Rough width of one 9.5 px character, to keep labels from overlapping."""
STRIP_ROW = 26
"""A strip lane: two label levels above the dots, the lane name beside them."""
MARGIN = 12
"""Kept clear right of the widest text."""


def text_width(s: str, size: float = 9.5, bold: bool = False) -> float:
    """Estimate how wide `s` is drawn, so the picture can be made wide enough for it."""
    return len(s) * CHAR * size / 9.5 * (1.15 if bold else 1.0)
