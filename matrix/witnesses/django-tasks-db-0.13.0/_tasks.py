"""The witness project's tasks: one that hangs once it has started, one that returns."""

import time
from pathlib import Path

from django_tasks import task


@task()
def hang(marker: str) -> None:
    """Say it started (a file at `marker`), then run for an hour: it is killed before."""
    Path(marker).write_text("started\n")
    time.sleep(3600)


@task()
def quick() -> str:
    return "done"
