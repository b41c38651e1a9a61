"""The `leasecheck` command: check a queue, replay a saved failure, draw a history.

    leasecheck check QUEUE | --sql FILE.sql [-n N] [--pg-dsn DSN] [--profile P] [-- ARGS]
    leasecheck replay FILE.json [--queue QUEUE] [--pg-dsn DSN]
    leasecheck judge FILE.json
    leasecheck svg FILE.json [-o OUT.svg]
    leasecheck explore QUEUE [--workers 2] [--jobs 1] [--moves 3] [--preemptions 1]

`check` runs the property tests through pytest, isolated from the current project's
pytest configuration, and exits 0 only when every property holds. `replay` runs a
saved program step by step against a queue (by default the one that failed),
exits 1 if a property breaks and saves that failure's files in .leasecheck/. `judge`
judges a saved failure's facts again with this leasecheck's oracle, without a queue
or a database, and exits 1 if a property breaks. Failures of the command itself exit
2 with one line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import leasecheck
from leasecheck import explore
from leasecheck.adapters.sqlfile_queue import SqlFileError, SqlFileQueue
from leasecheck.dbfixtures import janitor, servers
from leasecheck.stateful import actors, clock, contract, profiles, replay, svg
from leasecheck.stateful.judge import rejudge
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.properties import PropertyViolated

SQL_QUEUE = "leasecheck.adapters.sqlfile_queue:from_env"


class _Usage(Exception):
    """The command cannot go on; the message is the one line to print."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rest: list[str] = []
    if "--" in argv:  # what follows `--` goes to pytest untouched
        argv, rest = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    args = _parser().parse_args(argv)
    args.pytest_args = rest
    try:
        code: int = args.run(args)
    except _Usage as exc:
        print(f"leasecheck {args.command}: {exc}", file=sys.stderr)
        return 2
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="leasecheck", description="Property tests for PostgreSQL job queues with leases."
    )
    parser.add_argument("--version", action="version", version=leasecheck.__version__)
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="run the properties against a queue")
    which = check.add_mutually_exclusive_group(required=True)
    which.add_argument("queue", nargs="?", metavar="QUEUE", help="the queue as module:attr")
    which.add_argument("--sql", type=Path, metavar="FILE", help="a queue written as one .sql file")
    check.add_argument("-n", dest="workers", default="auto", help="pytest-xdist processes (auto)")
    _server_options(check)
    check.add_argument(
        "--profile", choices=sorted(profiles.PROFILES), default=profiles.default(),
        help="search budget (default: $LEASECHECK_PROFILE, else ci under $CI, else dev)",
    )  # fmt: skip
    check.set_defaults(run=_check)

    again = commands.add_parser("replay", help="replay a saved failure step by step")
    again.add_argument("file", type=Path, metavar="FILE.json")
    again.add_argument("--queue", help="replay against this queue (default: the one that failed)")
    again.add_argument("--sql", type=Path, metavar="FILE", help="replay against a .sql queue")
    _server_options(again)
    again.set_defaults(run=_replay)

    rejudge = commands.add_parser("judge", help="judge a saved failure's facts again")
    rejudge.add_argument("file", type=Path, metavar="FILE.json")
    rejudge.set_defaults(run=_judge)

    draw = commands.add_parser("svg", help="draw a saved history as an SVG timeline")
    draw.add_argument("file", type=Path, metavar="FILE.json")
    draw.add_argument("-o", "--out", type=Path, help="where to write (default: FILE.svg)")
    draw.set_defaults(run=_svg)
    explore.add_parser(commands)
    return parser


def _server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pg-dsn", default=os.environ.get("LEASECHECK_DSN"),
        help="your PostgreSQL server (default: $LEASECHECK_DSN, else an embedded one)",
    )  # fmt: skip


def _check(args: argparse.Namespace) -> int:
    """Run the property tests in a pytest of their own; return pytest's exit code."""
    env = dict(os.environ)
    spec = args.queue
    if args.sql is not None:
        env["LEASECHECK_SQL_QUEUE"] = _sql_file(args.sql)
        spec = SQL_QUEUE
    package_root = Path(leasecheck.__file__).resolve().parent.parent
    command = [
        sys.executable, "-m", "pytest",
        "-c", os.devnull, "--rootdir", str(package_root),  # not the current project's config
        "-p", "no:cacheprovider", "-ra",
        "--pyargs", "leasecheck.suite",
        "--leasecheck-queue", spec,
        "--leasecheck-profile", args.profile,
        "-n", str(args.workers),
        "--leasecheck-dir", str(Path(".leasecheck").resolve()),
    ]  # fmt: skip
    if args.pg_dsn:
        command += ["--leasecheck-pg-dsn", args.pg_dsn]
    return subprocess.call([*command, *args.pytest_args], env=env)


def _sql_file(path: Path) -> str:
    """Return the absolute path of a queue file that loads; a bad file is its own one line."""
    if not path.is_file():
        raise _Usage(f"--sql {path}: no such file")
    try:
        SqlFileQueue(path)
    except SqlFileError as exc:
        raise _Usage(str(exc)) from None
    return str(path.resolve())


def _replay(args: argparse.Namespace) -> int:
    """Replay a failure file; 0 when every property holds, 1 when one breaks."""
    sys.path.insert(0, os.getcwd())  # the queue's module, as `python -m pytest` would find it
    try:
        saved = replay.load(args.file)
    except ValueError as exc:
        raise _Usage(str(exc)) from None
    spec = args.queue or saved.queue_spec
    if args.sql is not None:
        os.environ["LEASECHECK_SQL_QUEUE"] = _sql_file(args.sql)
        spec = SQL_QUEUE
    if not spec:
        raise _Usage(f"{args.file} does not say which queue failed: pass --queue module:attr")
    try:
        queue = contract.load(spec)
        server = servers.resolve("embedded", args.pg_dsn, "")
    except (contract.ContractError, servers.ServerUnavailable) as exc:
        raise _Usage(str(exc)) from None
    print(f"leasecheck: replaying {args.file} ({len(saved.steps)} steps) against {queue.name!r}")
    print(f"leasecheck: it was recorded on {saved.queue!r}: {saved.violation.splitlines()[0]}")
    try:
        with janitor.temporary(server.dsn, "replay") as dsn:
            clock.prepare(dsn, queue)
            return _run(Harness(queue=queue, pool=actors.Pool(dsn), spec=spec), saved)
    finally:
        server.stop()


def _run(harness: Harness, saved: replay.Saved) -> int:
    harness.reset()
    try:
        done = replay.replay(harness, saved.steps)
    except PropertyViolated as error:
        print(str(error))
        out = Path(".leasecheck")
        for path in harness.recorder.write(out, harness.queue.name, harness.spec):
            if path.suffix == ".json":
                print(f"leasecheck: saved {path} (and .txt, .svg beside it)")
        return 1
    finally:
        harness.pool.close()
    for line in done.skipped:
        print(f"leasecheck: skipped {line}")
    print(f"leasecheck: every property holds over the {len(done.ran)} steps that applied")
    return 0


def _judge(args: argparse.Namespace) -> int:
    """Judge a failure file's saved facts again; 0 when every property holds, 1 if not."""
    try:
        data = json.loads(args.file.read_text())
        judge = rejudge(data["judge"])
    except (OSError, json.JSONDecodeError) as exc:
        raise _Usage(f"{args.file}: cannot read it as JSON ({exc})") from None
    except (KeyError, TypeError):
        raise _Usage(
            f"{args.file}: it has no judge's facts (written by an older leasecheck); "
            "replay it with `leasecheck replay` to save a file that has them"
        ) from None
    except ValueError as exc:
        raise _Usage(f"{args.file}: {exc}") from None
    oracle = judge.oracle
    print(f"leasecheck: judged {len(judge.facts)} facts of {args.file} again")
    for line in [*oracle.declared, *oracle.unjudged]:
        print(f"leasecheck: not judged: {line}")
    found = oracle.violations or oracle.deferred
    for violation in found:
        print(str(violation))
    saved = str(data.get("violation", ""))
    if saved and saved not in {str(v) for v in found}:
        print(f"leasecheck: the run that saved it reported: {saved.splitlines()[0]}")
    if not found:
        print("leasecheck: every property holds on these facts")
    return 1 if found else 0


def _svg(args: argparse.Namespace) -> int:
    argv = [str(args.file)] + (["-o", str(args.out)] if args.out else [])
    return svg.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
