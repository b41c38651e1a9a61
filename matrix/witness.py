"""Witnesses: a violated cell replayed through the library's own API, outside the machine.

A "violated" verdict about a real library is published as witnessed only when a
script `matrix/witnesses/<target>/<property>.py` replays the counterexample with the
library's public API or its installed SQL and shows the violation. The convention
(docs/matrix.md): the script runs in the target's venv as `python SCRIPT DSN` on an
empty database made for it here (the script never creates or drops databases),
prints one line per step, and ends with `WITNESSED: ...` and exit 0, or
`NOT REPRODUCED: ...` and exit 1. A cell without a script, or whose script does not
reproduce it, reads "violated (model only)", with the reason as its note.

`python -m matrix.witness TARGET PROPERTY` runs one witness by hand (building or
reusing the target's venv) and saves its output where the matrix does; it does not
change the conformance tables, which only a matrix run writes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from leasecheck.dbfixtures import embedded, janitor
from leasecheck.stateful.properties import ALL
from matrix import envs, targets

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "matrix" / "witnesses"
WITNESSED = "violated (witnessed)"
MODEL_ONLY = "violated (model only)"
_OURS = ("LEASECHECK_QUEUE", "LEASECHECK_EXCUSE", "LEASECHECK_DIR", "LEASECHECK_PROFILE", "CI")


@dataclass(frozen=True)
class Witness:
    """What one violated cell's witness showed: the verdict, why, and the script's output."""

    verdict: str
    note: str
    script: Path | None = None
    output: str | None = None
    seconds: float = 0.0

    def output_file(self, out: Path, target: str, prop: str) -> Path:
        """Return where the script's output is saved under the results directory `out`."""
        return out / "witnesses" / target / f"{prop}.txt"


def script_for(target: str, prop: str, scripts: Path = SCRIPTS) -> Path:
    """Return the witness script's path for one cell (it may not exist)."""
    return scripts / target / f"{prop}.py"


def shown(path: Path) -> str:
    """Return `path` relative to the repository when it is inside it."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def run(
    python: Path,
    script: Path,
    server_dsn: str,
    label: str,
    timeout: float = 120,
    env: dict[str, str] | None = None,
) -> Witness:
    """Run `script` on a fresh database of the server's; return what it showed."""
    started = time.monotonic()
    environ = {k: v for k, v in os.environ.items() if k not in _OURS}
    environ.update(env or {})
    with janitor.temporary(server_dsn, label) as dsn:
        try:
            done = subprocess.run(
                [str(python), str(script), dsn],
                cwd=REPO,
                env=environ,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            output = _text(exc.stdout) + _text(exc.stderr)
            note = f"witness timed out after {timeout:g} s"
            return Witness(MODEL_ONLY, note, script, output, time.monotonic() - started)
    output = done.stdout + (f"\n--- stderr ---\n{done.stderr}" if done.stderr.strip() else "")
    return _judge(done.returncode, done.stdout, script, output, time.monotonic() - started)


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _judge(code: int, stdout: str, script: Path, output: str, seconds: float) -> Witness:
    """Read the script's exit status and its last verdict line."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    witnessed = [ln for ln in lines if ln.startswith("WITNESSED:")]
    refused = [ln for ln in lines if ln.startswith("NOT REPRODUCED:")]
    if code == 0 and witnessed and not refused:
        return Witness(WITNESSED, witnessed[-1], script, output, seconds)
    if code == 1 and refused:
        return Witness(MODEL_ONLY, refused[-1], script, output, seconds)
    last = lines[-1] if lines else "no output"
    note = f"witness exited {code} without its verdict line (last line: {last})"
    return Witness(MODEL_ONLY, note, script, output, seconds)


def check(
    python: Path,
    target: targets.Target,
    prop: str,
    server_dsn: str,
    scripts: Path = SCRIPTS,
    timeout: float = 120,
) -> Witness:
    """Return the witness verdict for one violated cell (no script: model only)."""
    script = script_for(target.name, prop, scripts)
    if not script.exists():
        return Witness(MODEL_ONLY, f"no witness script ({shown(script)})")
    label = f"witness_{target.name}_{prop}".replace("-", "_").replace(".", "_")
    return run(python, script, server_dsn, label, timeout, target.env)


def check_all(
    python: Path,
    target: targets.Target,
    violated: list[str],
    server_dsn: str,
    scripts: Path = SCRIPTS,
    timeout: float = 120,
) -> dict[str, Witness]:
    """Return a witness verdict for every violated property of one target."""
    return {p: check(python, target, p, server_dsn, scripts, timeout) for p in violated}


def save(witnesses: dict[str, Witness], target: str, out: Path) -> dict[str, str]:
    """Write each script's output under `out`; return the files relative to `out`."""
    saved = {}
    for prop, witness in witnesses.items():
        if witness.output is None:
            continue
        path = witness.output_file(out, target, prop)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(witness.output)
        saved[prop] = str(path.relative_to(out))
    return saved


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m matrix.witness", description=__doc__)
    parser.add_argument("target", help="a matrix column (see matrix/targets.py)")
    parser.add_argument("property", choices=ALL)
    parser.add_argument(
        "--out", type=Path, default=REPO / "matrix" / "results", help="results directory"
    )
    parser.add_argument("--cache", type=Path, default=REPO / ".leasecheck", help="venv cache")
    parser.add_argument("--timeout", type=float, default=120, help="seconds the script may take")
    parser.add_argument(
        "--pg-dsn", default=os.environ.get("LEASECHECK_DSN"), help="server to use ($LEASECHECK_DSN)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    try:
        (target,) = targets.select([args.target])
    except ValueError as exc:
        print(f"matrix.witness: {exc}", file=sys.stderr)
        return 2
    script = script_for(target.name, args.property)
    if not script.exists():
        print(f"matrix.witness: no witness script at {script}", file=sys.stderr)
        return 2
    try:
        env = envs.ensure(target, REPO, args.cache.resolve())
    except envs.EnvError as exc:
        print(f"matrix.witness: {exc}", file=sys.stderr)
        return 2
    server = None if args.pg_dsn else embedded.start()
    try:
        dsn = args.pg_dsn or (server.dsn if server else "")
        witness = check(env.python, target, args.property, dsn, timeout=args.timeout)
    finally:
        if server is not None:
            server.stop()
    print(witness.output or "", end="" if (witness.output or "").endswith("\n") else "\n")
    saved = save({args.property: witness}, target.name, args.out.resolve())
    where = f"; output saved to {args.out / saved[args.property]}" if saved else ""
    print(f"{target.name} {args.property}: {witness.verdict} ({witness.note}){where}")
    return 0 if witness.verdict == WITNESSED else 1


if __name__ == "__main__":
    raise SystemExit(main())
