"""The whole machine's busy CPU seconds, for benchmarks that time a subprocess."""

from __future__ import annotations

import os
from pathlib import Path


def machine_cpu() -> float | None:
    """Return the machine's busy CPU seconds so far (all processes: the server too), or
    None where there is no /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    # the 8th field, steal, is time the host gave to others: not this machine's work
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
