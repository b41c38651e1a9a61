"""Draw a history as an SVG picture: who held which lease when, and whose completion won.

    leasecheck svg HISTORY.json [-o OUT.svg]

One lane per worker, simulated time left to right. Each claim is a bar in its job's
colour from the claim to the end of its lease as the judge saw it (the heartbeats it
accepted from the owner extend it), labelled `job1#1` whatever the queue's claim type;
a worker that still holds a job after its lease ran out gets a hatched tail up to its
completion, failure or crash. So a race reads at a glance: two bars of one job in two
lanes, two green completions. Events that happen at one simulated instant get a
column each, in history order, and the gap between instants grows with the elapsed
time on a log scale: a 1 µs race and a 30 s lease both stay visible; a long stretch
with no event is cut short. A heartbeat that answers nothing (`heartbeat_answers =
False`) is drawn as sent, neither accepted nor refused.

It reads the same `History` the text timeline renders, and the leases of the judge
that judged it again from the file's saved facts: it computes no lease of its own (a
claim never committed, one rolled back, shows the lease it was handed). The bars it
marks red are the ones the file's `violation_refs` name. Plain SVG, no dependencies.

The parts: `reading` (history and facts into bars and marks), `evidence` (which bars
the violation names), `axis` (time to x, cut stretches), `bars` and `marks` (drawing),
`legend` (legend and caption), `render` (the layout), `command` (files and the CLI),
`doc` and `style` (the SVG writer, measures and colours).
"""

from __future__ import annotations

from leasecheck.stateful.story.svg.command import Saved, draw, load, main, read
from leasecheck.stateful.story.svg.evidence import Refs
from leasecheck.stateful.story.svg.render import render_svg
from leasecheck.stateful.story.svg.style import CHAR as _CHAR

__all__ = ["_CHAR", "Refs", "Saved", "draw", "load", "main", "read", "render_svg"]
