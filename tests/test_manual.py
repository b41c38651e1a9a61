"""docs/reference.md is what `leasecheck.manual` generates from the declarations, and
a declaration it does not show fails here (no database: each test reads code only)."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from leasecheck import cli, manual
from leasecheck.stateful import contract, properties
from leasecheck.wing import options

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"


def test_the_committed_page_is_current() -> None:
    """A changed option, property, command or contract member changes the page; the
    committed one must follow, or the reference says what the code no longer does."""
    committed = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    generated = manual.reference()
    if committed != generated:
        diff = difflib.unified_diff(
            committed.splitlines(), generated.splitlines(), "committed", "generated", lineterm=""
        )
        shown = "\n".join(list(diff)[:40])
        pytest.fail(f"docs/reference.md is out of date: run {manual.REGENERATE}\n{shown}")


def test_the_page_says_how_to_regenerate_it() -> None:
    first = manual.reference().splitlines()[0]
    assert "Generated" in first
    assert manual.REGENERATE in first


def test_every_declaration_is_on_the_page() -> None:
    """Read from the sources the rest of the code uses, not from the generator's own
    reading: a declaration it misses (say, a new module's options) fails here."""
    page = manual.reference()
    missing = [
        *(f"option {name}" for name in options.option_names() if f"`{name} " not in page),
        *(f"ini option {name}" for name in _inis() if f"`{name}`" not in page),
        *(f"property {name}" for name in properties.ALL if f"`{name}`" not in page),
        *(f"contract member {name}" for name in contract.REQUIRED if f"- `{name}" not in page),
        *(
            f"capability {f.name}"
            for f in dataclasses.fields(contract.Capabilities)
            if f"- `{f.name}: " not in page
        ),
        *(f"command {name}" for name in _commands(cli._parser()) if f"### `{name}`" not in page),
        *(f"exit code {code}" for code in cli.EXIT_CODES if f"| `{code}` |" not in page),
    ]
    assert not missing, f"not on docs/reference.md: {', '.join(missing)}"


def test_a_new_option_changes_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """The committed page stops matching as soon as an option is declared."""
    declare = options.declare_options

    def with_one_more(add: Callable[..., object]) -> None:
        declare(add)
        add("--leasecheck-new-thing", metavar="X", help="new (default: $LEASECHECK_NEW_THING)")

    monkeypatch.setattr(options, "declare_options", with_one_more)
    page = manual.reference()
    assert "| `--leasecheck-new-thing X` | `LEASECHECK_NEW_THING` |" in page
    assert page != PAGE.read_text(encoding="utf-8")


def test_a_new_property_changes_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    new = properties.Property("new-property", properties.OWNERSHIP, "something holds", "", "", "")
    monkeypatch.setattr(properties, "REGISTRY", (*properties.REGISTRY, new))
    page = manual.reference()
    assert "| `new-property` | `NewPropertyViolated` | ownership | something holds |" in page
    assert page != PAGE.read_text(encoding="utf-8")


def test_an_undocumented_capability_stops_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each optional member is described by its line in the Capabilities docstring; one
    without a line would be a row with nothing to say, so the generator refuses."""
    doc = contract.Capabilities.__doc__ or ""
    monkeypatch.setattr(contract.Capabilities, "__doc__", doc.replace("- `maintain`:", "-"))
    with pytest.raises(LookupError, match="maintain"):
        manual.reference()


def test_the_environment_does_not_change_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defaults are read from the environment when declared; the page shows those of no
    environment, so it is the same in CI ($CI picks the ci profile) as on a laptop."""
    expected = manual.reference()
    for name, value in [
        ("CI", "1"),
        ("LEASECHECK_PROFILE", "deep"),
        ("LEASECHECK_DIR", "elsewhere"),
        ("LEASECHECK_DSN", "postgresql://somewhere"),
        ("LEASECHECK_ISOLATION", "serializable"),
    ]:
        monkeypatch.setenv(name, value)
    assert manual.reference() == expected


def test_every_exit_code_a_command_states_is_named() -> None:
    """A command's description that says "Exits N ..." names no code the table lacks."""
    parser = cli._parser()
    for path, command in _commands(parser).items():
        said = re.search(r"Exits (.*?)\.(\s|$)", command.description or "")
        stated = {int(n) for n in re.findall(r"\b\d+\b", said[1])} if said else set()
        assert stated <= set(cli.EXIT_CODES), f"{path}: {sorted(stated - set(cli.EXIT_CODES))}"


def test_check_says_in_one_line_when_a_page_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "reference.md"
    page.write_text(manual.reference(), encoding="utf-8")
    assert manual.main(["--check", str(page)]) == 0
    assert capsys.readouterr().err == ""
    page.write_text("# by hand\n", encoding="utf-8")
    assert manual.main(["--check", str(page)]) == 1
    assert capsys.readouterr().err == (
        f"{page} is out of date: run python -m leasecheck.manual > {page}\n"
    )


def _inis() -> list[str]:
    names: list[str] = []

    class Parser:
        def getgroup(self, *args: Any, **kwargs: Any) -> Parser:
            return self

        def addoption(self, *args: Any, **kwargs: Any) -> None:
            pass

        def addini(self, name: str, *args: Any, **kwargs: Any) -> None:
            names.append(name)

    options.pytest_addoption(Parser())  # type: ignore[arg-type]
    return names


def _commands(parser: argparse.ArgumentParser, path: str = "leasecheck") -> dict[str, Any]:
    """Return every subcommand by its full name (`leasecheck campaign merge`)."""
    found: dict[str, Any] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                found[f"{path} {name}"] = command
                found.update(_commands(command, f"{path} {name}"))
    return found
