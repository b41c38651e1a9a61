"""Write the failure files tests/test_svg.py reads: real mutants, found and shrunk.

    PYTHONPATH=. .venv/bin/python tests/data/make_svg_fixtures.py

Each is what a user's failing run saves (program, history and the judge's facts),
derandomized, so running it again writes the same files.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings

import mutants
from leasecheck.dbfixtures import embedded, janitor
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.properties import PropertyViolated

FIXTURES = {
    "naive": "single-completion",
    "no-row-lock": "exclusive-lease",
    "unfenced-fail": "fencing",
}
SHRUNK = settings(
    max_examples=1000,
    stateful_step_count=30,
    derandomize=True,
    database=None,
    deadline=None,
    phases=(Phase.generate, Phase.shrink),
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
)


def _died_on(harness: Harness) -> str | None:
    try:
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=SHRUNK)
    except PropertyViolated as error:
        return error.violation.prop
    return None


def main() -> None:
    here = Path(__file__).parent
    server = embedded.start()
    try:
        for name, prop in FIXTURES.items():
            spec = mutants.ALL[name]
            with (
                janitor.temporary(server.dsn, "fixtures") as dsn,
                tempfile.TemporaryDirectory() as out,
            ):
                queue = contract.load(spec)
                clock.prepare(dsn, queue)
                pool = actors.Pool(dsn)
                harness = Harness(queue=queue, pool=pool, spec=spec)
                harness.reset()
                try:
                    died_on = _died_on(harness)
                finally:
                    pool.close()
                if died_on != prop:
                    raise SystemExit(f"{name} died on {died_on}, not {prop}: fix FIXTURES")
                written = harness.recorder.write(Path(out), name, spec)
                (saved,) = [
                    p
                    for p in written
                    if p.name.startswith(f"{name}-{prop}-") and p.suffix == ".json"
                ]
                shutil.copy(saved, here / f"{name}-{prop}.json")
                print(f"wrote {here / f'{name}-{prop}.json'}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
