"""The witness's tasks: each leaves a marker file when it starts and when it ends."""

import os
import time
from pathlib import Path


def work(marker_dir: str, seconds: float, fail: bool = False) -> str:
    """Run `seconds`, marking start and end with this cluster's name; raise if `fail`."""
    cluster = os.environ["WITNESS_CLUSTER"]
    Path(marker_dir, f"{cluster}.started").touch()
    time.sleep(seconds)
    Path(marker_dir, f"{cluster}.ended").touch()
    if fail:
        raise RuntimeError(f"failed in cluster {cluster}")
    return f"ran by cluster {cluster}"
