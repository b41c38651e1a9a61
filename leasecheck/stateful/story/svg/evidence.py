"""Which bars the violation names: read from the failure's structured references.

A failure file says which claims and jobs its violation rests on as data:
`"violation_refs": {"grants": ["w0:job1#1", ...], "jobs": ["job1", ...]}` (grant labels
as the judge wrote them, job labels). The picture marks those bars. Only a file without
that key (an older one) has its violation's words searched for such names instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from leasecheck.stateful.story.svg.reading import Parsed


@dataclass(frozen=True)
class Refs:
    """The claims (grant labels) and jobs (job labels) a violation names."""

    grants: frozenset[str] = frozenset()
    jobs: frozenset[str] = frozenset()

    @classmethod
    def read(cls, saved: object) -> Refs:
        """Read the saved `violation_refs` value; raise ValueError if it has another shape."""
        if not isinstance(saved, dict):
            raise ValueError("violation_refs: expected an object with 'grants' and 'jobs' lists")
        found: dict[str, frozenset[str]] = {}
        for key in ("grants", "jobs"):
            labels = saved.get(key, [])
            if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
                raise ValueError(f"violation_refs: {key!r} must be a list of labels")
            found[key] = frozenset(labels)
        return cls(grants=found["grants"], jobs=found["jobs"])


def highlight(p: Parsed, refs: Refs) -> None:
    """Mark the bars of the named claims, and every bar of a named job none of whose
    claims is named."""
    for b in p.bars:
        b.hot = b.ref in refs.grants
    named = {b.job for b in p.bars if b.hot}
    for b in p.bars:
        b.hot = b.hot or (b.job in refs.jobs and b.job not in named)


def refs_in_words(p: Parsed, violation: str) -> Refs:
    """For a file without `violation_refs`: the `worker:job#token` names in the violation's
    text, else the job labels it mentions."""
    grants: set[str] = set()
    for worker, job, token in re.findall(r"([\w.\-]+):([^\s:#]+)#([^\s,;)]+)", violation):
        same = [b for b in p.bars if b.job == job and b.token == token]
        grants |= {b.ref for b in [b for b in same if b.worker == worker] or same}
    if grants:
        return Refs(grants=frozenset(grants))
    said = {j for j in p.jobs if re.search(rf"(?<![\w:]){re.escape(j)}(?![\w#])", violation)}
    return Refs(jobs=frozenset(said))
