"""Which bars the violation names: read from the failure's structured references."""

from __future__ import annotations

import re

from leasecheck.stateful.svg.reading import Parsed


def highlight(p: Parsed, violation: str) -> None:
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
