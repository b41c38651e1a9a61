"""The failure directory: made ours (a `.gitignore`) only when leasecheck created it, and
Hypothesis's examples in it keyed by queue and shard (with, read-only, a campaign's).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

from leasecheck.wing.campaign import SCOPES_FILE, VERSION_FILE

# --------------------------------------------------------- the failure directory


GITIGNORE = "*\n"

_out_existed_key = pytest.StashKey[bool]()
_OUT_EXISTED = "leasecheck_out_existed"


def out_dir(config: pytest.Config) -> Path:
    return Path(config.getoption("--leasecheck-dir"))


def out_existed(config: pytest.Config) -> bool:
    """Return whether the failure directory was there before this run (the user's, then)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and _OUT_EXISTED in workerinput:
        return bool(workerinput[_OUT_EXISTED])
    if _out_existed_key not in config.stash:
        config.stash[_out_existed_key] = out_dir(config).exists()
    return config.stash[_out_existed_key]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell each xdist worker whether the failure directory was there before the run."""
    node.workerinput[_OUT_EXISTED] = out_existed(node.config)


def mark_as_ours(directory: Path) -> None:
    """Put a `.gitignore` of `*` in a failure directory leasecheck created, once."""
    ignore = directory / ".gitignore"
    if directory.is_dir() and not ignore.exists():
        with contextlib.suppress(OSError):
            ignore.write_text(GITIGNORE)


class _ExamplesOf(ExampleDatabase):
    """The failure directory's example database, with keys of one queue and one shard.

    Hypothesis keys a state machine's examples by the factory's source, which is
    the same for every shard and every queue: without this, one shard's failure
    would be replayed by all of them and every queue sharing a directory.
    """

    def __init__(self, out: Path, scope: str, created: bool) -> None:
        super().__init__()
        self.out = out
        self.inner = DirectoryBasedExampleDatabase(out / "examples")
        self.scope = hashlib.sha256(scope.encode()).hexdigest()[:16].encode() + b":"
        self.named = scope
        self.created = created

    def __repr__(self) -> str:
        return f"leasecheck examples in {self.inner.path} ({self.scope.decode()[:-1]})"

    def _writing(self) -> None:
        if not self.out.exists():
            self.created = True
        self.out.mkdir(parents=True, exist_ok=True)
        if self.created:
            mark_as_ours(self.out)
        marker = self.out / "examples" / VERSION_FILE  # what a campaign merge checks
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(f"{hypothesis.__version__}\n")
        scopes = self.out / "examples" / SCOPES_FILE  # what a campaign's reader looks under
        if self.named not in _scopes(self.out):
            with scopes.open("a") as f:
                f.write(f"{self.named}\n")

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.inner.fetch(self.scope + key)

    def save(self, key: bytes, value: bytes) -> None:
        self._writing()
        self.inner.save(self.scope + key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        self.inner.delete(self.scope + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._writing()
        self.inner.move(self.scope + src, self.scope + dest, value)


def _scopes(directory: Path) -> list[str]:
    """Return the scopes whose examples `directory` holds, as its runs recorded them."""
    listed = directory / "examples" / SCOPES_FILE
    return listed.read_text().splitlines() if listed.is_file() else []


def examples(out: Path, scope: str, created: bool, shared: Path | None) -> ExampleDatabase:
    """Return the examples of `scope` in the failure directory `out`, tried first; with
    `shared` (a campaign's merged directory, `--leasecheck-examples-from`), every example
    it holds of the same queue too, whatever shard found it (a campaign's jobs split the
    run into other shards than this one), read and never written."""
    own = _ExamplesOf(out, scope, created)
    if shared is None:
        return own
    queue = scope.rpartition("|")[0]
    named = [s for s in _scopes(shared) if s.rpartition("|")[0] == queue] or [scope]
    found = [_ExamplesOf(shared, s, created=False) for s in dict.fromkeys(named)]
    return MultiplexedDatabase(own, ReadOnlyDatabase(MultiplexedDatabase(*found)))
