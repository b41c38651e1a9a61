"""Split one property run into test items that explore disjoint parts of the search.

A single test item runs on a single core, so a user's `pytest -n auto` could not
go faster than one process. Shard k of S gets 1/S of the profile's examples and a
seed of its own: derived from k, so a derandomized profile stays the same run every
time, or from k and `--hypothesis-seed N` when one is given, so N picks another run
and every shard still explores a part of its own. `--leasecheck-shard I/N` keeps
every N-th shard, so a CI matrix fans one run out over N machines without two
machines exploring the same seed.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

from hypothesis import settings

DEFAULT_COUNT = 8
"""Items per run: enough to keep every core busy under `-n auto` on up to 8 cores."""

_BASE_SEED = 0x1EA5EC


@dataclass(frozen=True)
class Shard:
    """One slice of the search: which of how many, and its budget."""

    index: int
    count: int
    base: object | None = None
    """The run's own seed (`--hypothesis-seed`), if one was given."""

    @property
    def id(self) -> str:
        return f"shard-{self.index + 1}-of-{self.count}"

    @property
    def seed(self) -> int:
        """This shard's seed: one of its own, from the run's seed when there is one."""
        if self.base is None:
            return _BASE_SEED + self.index
        digest = hashlib.sha256(f"leasecheck/{self.base}/{self.index}".encode()).digest()
        return int.from_bytes(digest[:8], "big")

    def budget(self, whole: settings) -> settings:
        """Return `whole` cut to this shard's share of the examples."""
        return settings(whole, max_examples=max(1, math.ceil(whole.max_examples / self.count)))


class ShardError(ValueError):
    """A shard option is malformed; the message says how to write it."""


_SLICE = re.compile(r"^(\d+)/(\d+)$")


def parse_slice(text: str | None) -> tuple[int, int] | None:
    """Return (I, N) of `--leasecheck-shard I/N` (1-based), or None when not given."""
    if not text:
        return None
    match = _SLICE.match(text.strip())
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise ShardError(
            f"--leasecheck-shard {text!r}: write I/N with 1 <= I <= N, e.g. 2/4 for the "
            "second of four machines"
        )
    return int(match[1]), int(match[2])


def select(count: int, part: tuple[int, int] | None, base: object | None = None) -> list[Shard]:
    """Return the shards of a run of `count` (seeded from `base`, if given), or only
    those of machine I of N."""
    if count < 1:
        raise ShardError(f"--leasecheck-shards {count}: give at least 1")
    shards = [Shard(k, count, base) for k in range(count)]
    if part is None:
        return shards
    i, n = part
    if n > count:
        raise ShardError(
            f"--leasecheck-shard {i}/{n}: more machines than shards ({count}); raise "
            f"--leasecheck-shards to at least {n}"
        )
    return [s for s in shards if s.index % n == i - 1]
