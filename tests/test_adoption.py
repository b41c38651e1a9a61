"""A queue's own repository adopts leasecheck from its built wheel, and nothing else of ours.

The wheel is built from this checkout and installed into a fresh virtual
environment, beside nothing of this repository. `tests/data/myqueue` is a queue's
repository as its author would set it up: a correct queue (claims are plain
tuples; it imports nothing from leasecheck), a buggy variant that completes by task
id only, one adoption file, the queue named in its `pyproject.toml`, and one
committed counterexample. Each test runs pytest or the `leasecheck` command there,
as that author would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from tests import child

REPO = Path(__file__).resolve().parent.parent
MYQUEUE = Path(__file__).with_name("data") / "myqueue"
COUNTEREXAMPLE = "regressions/myqueue-buggy-single-completion-cefe2a4e.json"

pytestmark = pytest.mark.slow


def _once(tmp_path_factory: pytest.TempPathFactory, name: str) -> tuple[Path, FileLock]:
    """Return where `name` is built once per run, and the lock to build it under: under
    xdist the session's directory that every worker shares (pytest-xdist's recipe), so
    the wheel and its venv are built by the first worker that needs them."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return root / name, FileLock(str(root / f"{name}.lock"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return leasecheck's wheel, built once per run from a copy of this checkout.

    A copy, because setuptools builds in the source tree.
    """
    out, lock = _once(tmp_path_factory, "adoption-wheel")
    with lock:
        if not list(out.glob("leasecheck-*.whl")):
            source = tmp_path_factory.mktemp("source")
            skip = shutil.ignore_patterns(
                ".git", ".venv", "build", "*.egg-info", ".leasecheck", "__pycache__"
            )
            shutil.copytree(REPO, source, ignore=skip, symlinks=True, dirs_exist_ok=True)
            pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
            built = subprocess.run(
                [*pip, "-w", str(out), str(source)], capture_output=True, text=True, check=False
            )
            assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = out.glob("leasecheck-*.whl")
    return wheel


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return the bin directory of a fresh virtual environment with only the wheel
    installed, made once per run (the tests only run its commands)."""
    where, lock = _once(tmp_path_factory, "adoption-venv")
    with lock:
        if not (where / "installed").exists():
            shutil.rmtree(where, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
            pip = [str(where / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)]
            installed = subprocess.run(pip, capture_output=True, text=True, check=False)
            assert installed.returncode == 0, installed.stdout + installed.stderr
            (where / "installed").touch()
    return where / "bin"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Return a fresh copy of the queue's repository (runs write .leasecheck/ into it)."""
    copy = tmp_path / "myqueue"
    shutil.copytree(MYQUEUE, copy)
    return copy


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """Return a TMPDIR the embedded server's user may enter."""
    with child.scratch() as path:
        yield path


def _run(venv: Path, project: Path, scratch: Path, *argv: str) -> child.Finished:
    """Run a command of the venv from the project's directory, as its author would."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "LEASECHECK_", "HYPOTHESIS_", "PYTHON", "VIRTUAL_ENV"))
        and k != "CI"
    }
    env.update(TMPDIR=str(scratch), LEASECHECK_PROFILE="ci", PATH=f"{venv}:{env['PATH']}")
    done = subprocess.run(
        argv, cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    return child.Finished(done.returncode, done.stdout + done.stderr)


def test_the_wheel_holds_one_import_package(wheel: Path) -> None:
    """Nothing but `leasecheck` (and its metadata) lands in site-packages."""
    names = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert names == {"leasecheck", f"{wheel.name.split('-py3')[0]}.dist-info"}


def test_the_wheel_carries_its_licence(wheel: Path) -> None:
    """The MIT text travels with every install, and the metadata names it."""
    archive = zipfile.ZipFile(wheel)
    (licence,) = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert archive.read(licence).decode().startswith("MIT License")
    (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    assert "License-Expression: MIT" in archive.read(metadata).decode()


def test_the_wheel_carries_every_file_the_package_reads(wheel: Path) -> None:
    """Every named-SQL and script file beside the modules is in the wheel: a package
    directory left out of pyproject.toml's package-data fails here, not at import."""
    package = REPO / "leasecheck"
    data = {
        f"leasecheck/{path.relative_to(package).as_posix()}"
        for path in package.rglob("*")
        if path.is_file() and path.suffix in {".sql", ".mjs"}
    }
    assert data, "no data files found: the test would prove nothing"
    assert data - set(zipfile.ZipFile(wheel).namelist()) == set()


def test_a_correct_queue_passes_with_xdist(venv: Path, project: Path, scratch: Path) -> None:
    """`pytest -n 2` in the queue's repository runs the properties (and its committed
    counterexample) against the queue its pyproject.toml names, and nothing else. Half
    the run's shards, as the first of two CI machines runs them (`--leasecheck-shard`);
    the command's test runs the other half."""
    done = _run(
        venv, project, scratch,
        "python", "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "--leasecheck-shard=1/2",
    )  # fmt: skip
    assert done.returncode == 0, done.output
    assert "leasecheck: queue under test 'myqueue' (myqueue.queue:Queue)" in done.output
    assert "5 passed, 1 skipped" in done.lines[-1], done.output  # 4 shards + 1 regression


def test_a_buggy_queue_fails_on_single_completion(venv: Path, project: Path, scratch: Path) -> None:
    """Completing by task id alone is the story's bug: a second completion commits."""
    done = _run(
        venv, project, scratch,
        "python", "-m", "pytest", "-n", "2", "-p", "no:cacheprovider",
        "--leasecheck-queue", "myqueue.buggy:Queue",
    )  # fmt: skip
    assert done.returncode == 1, done.output
    assert "[single-completion] task" not in done.output  # labels are the harness's, not ids
    assert "[single-completion] job1 completed 2 times" in done.output
    assert "leasecheck replay .leasecheck/myqueue-buggy-single-completion-" in done.output
    assert list((project / ".leasecheck").glob("myqueue-buggy-single-completion-*.svg"))


def test_no_queue_named_is_a_usage_error(venv: Path, project: Path, scratch: Path) -> None:
    """Outside leasecheck's repository nothing falls back to a bundled queue."""
    ini = project / "pyproject.toml"
    ini.write_text(ini.read_text().replace('leasecheck_queue = "myqueue.queue:Queue"\n', ""))
    done = _run(venv, project, scratch, "python", "-m", "pytest", "-p", "no:cacheprovider")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.output
    error = (
        "ERROR: leasecheck: no queue named; name the queue under test: pytest "
        "--leasecheck-queue module:attr, LEASECHECK_QUEUE=module:attr, or leasecheck_queue = "
        '"module:attr" under [tool.pytest.ini_options] in pyproject.toml'
    )
    # Only pytest's own session header comes before it.
    assert done.lines[-1] == error, done.output
    assert done.lines[0].startswith("=" * 10) and "test session starts" in done.lines[0]
    assert sum("leasecheck:" in line for line in done.lines) == 1, done.output


def test_the_command_gives_the_same_verdicts(venv: Path, project: Path, scratch: Path) -> None:
    """`leasecheck check` passes the correct queue and fails the buggy one. The correct
    queue's run is the second half of the shards, opening and all: with the xdist test's
    first half, the whole `ci` run."""
    good = _run(
        venv, project, scratch,
        "leasecheck", "check", "myqueue.queue:Queue", "-n", "2", "--leasecheck-shard=2/2",
    )  # fmt: skip
    assert good.returncode == 0, good.output
    bad = _run(venv, project, scratch, "leasecheck", "check", "myqueue.buggy:Queue", "-n", "2")
    assert bad.returncode == 1, bad.output
    assert "[single-completion] job1 completed 2 times" in bad.output


def test_a_committed_counterexample_replays_to_the_same_violation(
    venv: Path, project: Path, scratch: Path
) -> None:
    """The saved program breaks the buggy queue the same way, and holds on the fixed one."""
    bad = _run(venv, project, scratch, "leasecheck", "replay", COUNTEREXAMPLE)
    assert bad.returncode == 1, bad.output
    assert "[single-completion] job1 completed 2 times" in bad.output
    good = _run(
        venv, project, scratch, "leasecheck", "replay", COUNTEREXAMPLE,
        "--queue", "myqueue.queue:Queue",
    )  # fmt: skip
    assert good.returncode == 0, good.output
    assert "every property holds" in good.lines[-1]
