"""The `leasecheck` command: check a queue, replay a saved failure, draw a history.

    leasecheck check [QUEUE | --sql FILE.sql] [-n N] [--leasecheck-* ...] [-- PYTEST ARGS]
    leasecheck replay FILE.json [--queue QUEUE | --sql FILE.sql] [--pg-dsn DSN]
    leasecheck judge FILE.json
    leasecheck svg FILE.json [-o OUT.svg]
    leasecheck explore QUEUE [--workers 2] [--jobs 1] [--moves 3] [--preemptions 1]
    leasecheck campaign merge DIR ... --into OUT | campaign report JUNIT.xml ...

`check` runs the property tests through pytest, isolated from the project's pytest
configuration but for `leasecheck_queue` and `leasecheck_regressions`, takes every
`--leasecheck-*` option of the plugin (and its environment variables), passes what follows
`--` to pytest, and exits 0 only when every property holds; SIGINT or SIGTERM stops the run,
its server and its files (exit 130 or 143). `replay` runs a saved program against a queue
(by default the one that failed, a `.sql` queue's file included) and `judge` judges a saved
failure's facts again, without a queue or a database: each exits 1 if a property breaks.
`campaign` merges many jobs' failure directories and adds up what they exercised. The
command's own failures exit 2 with one line.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import leasecheck
from leasecheck import explore
from leasecheck.adapters.sqlfile_queue import SqlFileError, SqlFileQueue
from leasecheck.dbfixtures import embedded, janitor, servers
from leasecheck.dbfixtures import plugin as dbplugin
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import replay, svg
from leasecheck.stateful.verdict.judge import rejudge
from leasecheck.wing import campaign, options, outdir, projectconfig, undertest

SQL_QUEUE = undertest.SQL_QUEUE
STOP_WITHIN = 30.0
"""Seconds an interrupted run may take to stop before the command kills it."""
_ALIASES = {"--leasecheck-pg-dsn": ("--pg-dsn",), "--leasecheck-profile": ("--profile",)}
_OWN = {"--leasecheck-queue", "--leasecheck-pg-dsn", "--leasecheck-regressions"}
"""Options `check` passes on itself (the queue, the DSN through the environment, the
regressions directory resolved against the project's configuration)."""
EXIT_CODES = {
    0: "every property holds (check, replay, judge), the scope holds (explore), or done (campaign)",
    1: "a property breaks or the queue broke the contract (check, replay), a property breaks "
    "on the saved facts (judge), a counterexample (explore), or a job failed (campaign report)",
    2: "the command cannot go on (a usage error, a queue that does not load, unusable "
    "input), said in one line",
    3: "explore: the time budget ran out before the scope was searched whole (check: "
    "pytest's internal error)",
    5: "check: pytest collected no test (e.g. `-- -k` matched none)",
    130: "check: stopped by SIGINT; the run, its server and its files are removed first",
    143: "check: stopped by SIGTERM; the run, its server and its files are removed first",
}
"""What the exit codes of every subcommand mean, in one place: the help texts and
docstrings say them command by command, and docs/reference.md is generated from this."""


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


def _plugin_options() -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """Return the pytest plugin's options, as it declares them."""
    found: list[tuple[tuple[str, ...], dict[str, Any]]] = []

    def add(*flags: str, **attrs: Any) -> None:
        found.append((flags, attrs))

    options.declare_options(add)
    dbplugin.declare_options(add)
    return found


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="leasecheck", description="Property tests for PostgreSQL job queues with leases."
    )
    parser.add_argument("--version", action="version", version=leasecheck.__version__)
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser(
        "check",
        help="run the properties against a queue",
        description="Run leasecheck's property tests against a queue, in a pytest of their "
        "own: isolated from the project's pytest configuration, except for leasecheck_queue "
        "and leasecheck_regressions in it. Every --leasecheck-* option of the pytest plugin "
        "is accepted here (below), as are their environment variables; whatever follows "
        "`--` is passed to pytest as it is. Exits 0 when every property holds, 1 when one "
        "breaks, 130/143 when stopped by SIGINT/SIGTERM (the run, its server and its files "
        "are stopped and removed first), 2 for a usage error.",
        usage="leasecheck check [QUEUE | --sql FILE] [-n N] [--leasecheck-OPTION VALUE ...] "
        "[-- PYTEST ARGS]",
        allow_abbrev=False,
    )
    check.add_argument(
        "queue",
        nargs="?",
        metavar="QUEUE",
        help="the queue as module:attr (default: --leasecheck-queue, $LEASECHECK_QUEUE, "
        "then leasecheck_queue in the project's pytest configuration)",
    )
    check.add_argument("--sql", type=Path, metavar="FILE", help="a queue written as one .sql file")
    check.add_argument("-n", dest="workers", default="auto", help="pytest-xdist processes (auto)")
    options = check.add_argument_group("the pytest plugin's options (also as --leasecheck-X=VALUE)")
    for flags, attrs in _plugin_options():
        given = {k: v for k, v in attrs.items() if k != "default"}
        options.add_argument(
            *flags, *_ALIASES.get(flags[0], ()), dest=_dest(flags[0]), default=argparse.SUPPRESS,
            **given,
        )  # fmt: skip
    check.set_defaults(run=_check)

    again = commands.add_parser(
        "replay",
        help="replay a saved failure step by step",
        description="Replay a failure file's program (or one written by hand) step by step "
        "against a queue, outside Hypothesis, judged after every step as the run judged it "
        "(its excuses too). Exits 0 when every property holds, 1 when one breaks (its files "
        "saved again), 2 on unusable input.",
    )
    again.add_argument("file", type=Path, metavar="FILE.json")
    again.add_argument("--queue", help="replay against this queue (default: the one that failed)")
    again.add_argument(
        "--sql", type=Path, metavar="FILE",
        help="replay against a .sql queue (default: the file the failure records)",
    )  # fmt: skip
    _server_options(again)
    again.add_argument(
        "--leasecheck-dir", type=Path, metavar="DIR",
        default=Path(os.environ.get("LEASECHECK_DIR", ".leasecheck")),
        help="where a failure's files go (default: $LEASECHECK_DIR or .leasecheck)",
    )  # fmt: skip
    again.set_defaults(run=_replay)

    rejudge = commands.add_parser(
        "judge",
        help="judge a saved failure's facts again",
        description="Judge the facts a failure file saved (every answer its verdict rests "
        "on) again with this leasecheck's judge, without the queue or a database: after "
        "an upgrade, the verdict is this version's. Exits 0 when every property holds on "
        "them, 1 when one breaks, 2 on unusable input.",
    )
    rejudge.add_argument("file", type=Path, metavar="FILE.json")
    rejudge.set_defaults(run=_judge)

    draw = commands.add_parser(
        "svg",
        help="draw a saved history as an SVG timeline",
        description="Draw a failure file's history as an SVG timeline: one lane per worker, "
        "who held which lease when, as the judge saw it, and the violation.",
    )
    draw.add_argument("file", type=Path, metavar="FILE.json")
    draw.add_argument("-o", "--out", type=Path, help="where to write (default: FILE.svg)")
    draw.set_defaults(run=_svg)
    explore.add_parser(commands)
    campaign.add_parser(commands)
    return parser


def _server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pg-dsn", "--leasecheck-pg-dsn", dest="pg_dsn", default=os.environ.get("LEASECHECK_DSN"),
        help="your PostgreSQL server (default: $LEASECHECK_DSN, else an embedded one)",
    )  # fmt: skip


# ------------------------------------------------------------------------ check


def _check(args: argparse.Namespace) -> int:
    """Run the property tests in a pytest of their own; return its exit code (2 for pytest's
    usage error, as for the command's own)."""
    env = dict(os.environ)
    project = projectconfig.find(Path.cwd())
    spec = _queue(args, env, project)
    given = vars(args)
    if "leasecheck_pg_dsn" in given:
        env["LEASECHECK_DSN"] = given["leasecheck_pg_dsn"]  # not in argv, where `ps` shows it
    package_root = Path(leasecheck.__file__).resolve().parent.parent
    command = [
        sys.executable, "-m", "pytest",
        # leasecheck's own, empty configuration, not the current project's
        "-c", str(package_root / "leasecheck" / "check.ini"), "--rootdir", str(package_root),
        "-p", "no:cacheprovider", "-ra",
        "--pyargs", "leasecheck.suite",
        "-n", str(args.workers),
    ]  # fmt: skip
    if spec is not None:
        command.append(f"--leasecheck-queue={spec}")
    regressions = given.get("leasecheck_regressions")
    regressions = regressions or projectconfig.path(project, "leasecheck_regressions")
    if regressions:
        command.append(f"--leasecheck-regressions={regressions}")
    for flags, attrs in _plugin_options():
        if flags[0] in _OWN or _dest(flags[0]) not in given:
            continue
        value = given[_dest(flags[0])]
        for one in value if attrs.get("action") == "append" else [value]:
            command.append(f"{flags[0]}={one}")  # the `=` form: never taken for a test path
    code = _run_pytest([*command, *args.pytest_args], env)
    return 2 if code == pytest.ExitCode.USAGE_ERROR else code  # one code for usage errors


def _queue(
    args: argparse.Namespace, env: dict[str, str], project: projectconfig.Config | None
) -> str | None:
    """Return the queue to pass on (None: the environment names it); raise _Usage if none."""
    named = [
        (where, value)
        for where, value in (
            ("QUEUE", args.queue),
            ("--leasecheck-queue", getattr(args, "leasecheck_queue", None)),
            ("--sql", args.sql),
        )
        if value
    ]
    if len(named) > 1:
        raise _Usage(f"name the queue once: {' and '.join(w for w, _ in named)} both name one")
    if args.sql is not None:
        env["LEASECHECK_SQL_QUEUE"] = _sql_file(args.sql)
        return SQL_QUEUE
    if named:
        return str(named[0][1])
    if env.get("LEASECHECK_QUEUE"):
        return None
    ini = projectconfig.value(project, "leasecheck_queue")
    if ini:
        return ini
    raise _Usage(
        "name the queue under test: leasecheck check module:attr, --sql FILE.sql, "
        "LEASECHECK_QUEUE=module:attr, or leasecheck_queue in the project's pytest "
        "configuration (pyproject.toml [tool.pytest.ini_options], pytest.ini, ...)"
    )


def _run_pytest(command: list[str], env: dict[str, str]) -> int:
    """Run pytest in a process group of its own, pass SIGINT and SIGTERM on to it, and
    return its exit code (128 + the signal when one stopped it).

    In its own group, a terminal's Ctrl-C reaches only this command, which passes it
    on to the whole run once; on Linux the run is also told (SIGTERM) if this command
    dies. A run that does not stop within STOP_WITHIN seconds is killed, and what it
    left behind (its embedded server) reaped.
    """
    if os.name != "posix":  # pragma: no cover - no process groups to manage
        return subprocess.call(command, env=env)
    received: list[tuple[int, float]] = []
    setup = functools.partial(_own_group, os.getpid())
    child = subprocess.Popen(command, env=env, preexec_fn=setup)

    def forward(signum: int, frame: FrameType | None) -> None:
        received.append((signum, time.monotonic()))
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    killed = False
    try:
        while True:
            try:
                code = child.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if received and not killed and time.monotonic() > received[0][1] + STOP_WITHIN:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.pid, signal.SIGKILL)
                killed = True
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if not received:
        return code
    embedded.reap()  # what a killed run left
    dbplugin.reap_run_dirs()
    first = received[0][0]
    name = signal.Signals(first).name
    if killed:
        print(
            f"leasecheck check: stopped by {name}; the run did not end within "
            f"{STOP_WITHIN:.0f} s, so it was killed and its server removed",
            file=sys.stderr,
        )
    elif code != 2:  # pytest said nothing of the interruption (it ended as it came)
        print(f"leasecheck check: stopped by {name}", file=sys.stderr)
    return 128 + first


def _own_group(parent: int) -> None:
    """In the child, before pytest starts: a process group of its own, and on Linux a
    SIGTERM when the command that started it dies (even by SIGKILL)."""
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)


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
    if args.queue and args.sql is not None:
        raise _Usage("name the queue once: --queue and --sql both name one")
    if args.sql is not None:
        spec = f"{undertest.SQL_SPEC}{_sql_file(args.sql)}"
    if not spec:
        raise _Usage(f"{args.file} does not say which queue failed: pass --queue module:attr")
    if spec == SQL_QUEUE and not os.environ.get("LEASECHECK_SQL_QUEUE"):
        raise _Usage(
            f"{args.file} was recorded on a .sql queue without saying which file (by an "
            "older leasecheck): pass --sql FILE.sql"
        )
    try:
        queue = _load(spec, args.file)
        server = servers.resolve("embedded", args.pg_dsn, "")
    except (contract.ContractError, servers.ServerUnavailable) as exc:
        raise _Usage(str(exc)) from None
    print(f"leasecheck: replaying {args.file} ({len(saved.steps)} steps) against {queue.name!r}")
    if saved.violation:
        print(f"leasecheck: it was recorded on {saved.queue!r}: {saved.violation.splitlines()[0]}")
    else:
        print("leasecheck: it records no violation (a program written by hand?)")
    if saved.excused:
        print(f"leasecheck: judged as it was recorded, excusing {', '.join(sorted(saved.excused))}")
    try:
        with janitor.temporary(server.dsn, "replay") as dsn:
            clock.prepare(dsn, queue)
            pool = actors.Pool(dsn, clients=contract.clients(queue))
            harness = Harness(queue=queue, pool=pool, spec=spec, excused=saved.excused)
            return _run(harness, saved, args.leasecheck_dir)
    finally:
        server.stop()


def _load(spec: str, file: Path) -> contract.Queue:
    """Return the queue `spec` names: module:attr, or sql:PATH as a failure file records it."""
    if not spec.startswith(undertest.SQL_SPEC):
        return contract.load(spec)
    path = Path(spec[len(undertest.SQL_SPEC) :])
    if not path.is_file():
        raise _Usage(
            f"{file} was recorded on the SQL queue {path}, which is not there (from "
            f"{Path.cwd()}): run from where it was recorded, or pass --sql FILE.sql"
        )
    try:
        return SqlFileQueue(path)
    except SqlFileError as exc:
        raise _Usage(str(exc)) from None


def _run(harness: Harness, saved: replay.Saved, out: Path) -> int:
    harness.reset()
    try:
        done = replay.replay(harness, saved.steps)
    except PropertyViolated as error:
        print(str(error))
        created = not out.exists()
        for path in harness.recorder.write(out, harness.queue.name, harness.spec, harness.excused):
            if path.suffix == ".json":
                print(f"leasecheck: saved {path} (and .txt, .svg beside it)")
        if created:
            outdir.mark_as_ours(out)
        return 1
    except contract.ContractError as error:
        print(f"leasecheck: the queue broke the contract, so no property was judged: {error}")
        for note in getattr(error, "__notes__", ()):
            print(note)
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
    for line in [*oracle.ledger.declared, *oracle.ledger.unjudged]:
        print(f"leasecheck: not judged: {line}")
    found = oracle.ledger.violations or oracle.ledger.deferred
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
