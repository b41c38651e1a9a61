"""docs/reference.md, generated from leasecheck's own declarations.

A reference written by hand drifts from the options, properties, commands and
contract it describes; this one is read from the declarations themselves, at
runtime, and tests/test_manual.py fails when the committed page is not what
`reference()` returns.

    python -m leasecheck.manual > docs/reference.md
    python -m leasecheck.manual --check docs/reference.md
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from leasecheck import cli
from leasecheck.stateful import contract, properties
from leasecheck.wing import plugin

COMMAND = "python -m leasecheck.manual"
REGENERATE = f"{COMMAND} > docs/reference.md"

Flags = tuple[str, ...]


def reference() -> str:
    """Return the Markdown of docs/reference.md."""
    declared = declarations()
    with _no_environment():
        parser = cli._parser()  # defaults read the environment when the parser is built
    sections = [
        _header(),
        _options(declared),
        _properties(),
        _commands(parser, declared),
        _contract(),
    ]
    return "\n\n".join(sections) + "\n"


# ------------------------------------------------------------- what the plugin declares


@dataclass
class Declarations:
    """What the plugin's `pytest_addoption` hooks declare, as pytest receives it.

    It stands in for pytest's parser and its option group, so the hooks run exactly
    as in a pytest session and nothing they declare is left out.
    """

    options: list[tuple[Flags, dict[str, Any]]] = field(default_factory=list)
    inis: list[tuple[str, str, str | None]] = field(default_factory=list)
    """Each ini option's name, help and type (None: a string)."""

    def getgroup(self, name: str, description: str = "", after: str | None = None) -> Any:
        return self

    def addoption(self, *flags: str, **attrs: Any) -> None:
        self.options.append((flags, attrs))

    def addini(self, name: str, help: str, type: str | None = None, default: Any = None) -> None:
        self.inis.append((name, help, type))


@dataclass
class _Registry:
    """Stands in for pytest's plugin manager, to learn which modules the plugin brings."""

    modules: list[object] = field(default_factory=list)

    def is_registered(self, module: object) -> bool:
        return module in self.modules

    def register(self, module: object, name: str | None = None) -> None:
        self.modules.append(module)


def plugin_modules() -> list[ModuleType]:
    """Return the plugin's modules: the entry point's, and those its `pytest_addhooks`
    registers (so a module added there is documented without naming it here)."""
    registry = _Registry()
    plugin.pytest_addhooks(cast(pytest.PytestPluginManager, registry))
    return [plugin, *(m for m in registry.modules if isinstance(m, ModuleType))]


def declarations() -> Declarations:
    """Return every option and ini option the plugin declares, as the defaults read
    with no environment (a page generated in CI, where $CI picks the profile, or with
    $LEASECHECK_DIR set, would otherwise differ from one generated elsewhere)."""
    declared = Declarations()
    with _no_environment():
        for module in plugin_modules():
            hook: Callable[[pytest.Parser], None] | None = getattr(module, "pytest_addoption", None)
            if hook is not None:
                hook(cast(pytest.Parser, declared))
    return declared


@contextlib.contextmanager
def _no_environment() -> Iterator[None]:
    """Empty the environment for the while: declarations read it into their defaults."""
    saved = dict(os.environ)
    os.environ.clear()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


# ---------------------------------------------------------------------------- sections


def _header() -> str:
    return (
        f"_Generated from leasecheck's own declarations; do not edit. Regenerate with "
        f"`{REGENERATE}`._\n\n"
        "# leasecheck reference\n\n"
        "The pytest plugin's options, the properties the suite judges, the `leasecheck` "
        "command's subcommands and exit codes, and the contract a queue implements, as "
        "the code declares them."
    )


_VARIABLE = re.compile(r"\$([A-Z][A-Z0-9_]*)")


def _options(declared: Declarations) -> str:
    """The plugin's options. An option's environment variable is the first `$NAME` its
    help names: the declaration reads it into the default, which keeps no name. Its ini
    option is the one of the same name (`--leasecheck-queue`, `leasecheck_queue`), the
    pair the plugin reads together."""
    inis = {name for name, _, _ in declared.inis}
    rows = []
    for flags, attrs in declared.options:
        help_text = str(attrs.get("help", ""))
        variable = _VARIABLE.search(help_text)
        ini = _dest(flags[0])
        rows.append(
            [
                _code(_argument(flags, attrs)),
                _code(variable[1]) if variable else "",
                _code(ini) if ini in inis else "",
                _default(attrs.get("default")),
                _cell(help_text),
            ]
        )
    ini_rows = [[_code(name), kind or "string", _cell(text)] for name, text, kind in declared.inis]
    return "\n".join(
        [
            "## Options",
            "",
            "Options of `pytest` with the plugin, and of `leasecheck check`. A default is "
            "the one with no environment variable set.",
            "",
            _table(["option", "environment", "ini", "default", "help"], rows),
            "",
            "### Ini options",
            "",
            "Read from the project's pytest configuration (`[tool.pytest.ini_options]` in "
            "pyproject.toml, pytest.ini, ...).",
            "",
            _table(["ini option", "type", "help"], ini_rows),
        ]
    )


def _properties() -> str:
    rows = [
        [
            _code(p.id),
            _code(properties.violation_error(p.id).__name__),
            p.family,
            _cell(p.holds),
        ]
        for p in properties.REGISTRY
    ]
    return "\n".join(
        [
            "## Properties",
            "",
            "Each under the id that test names, reports, `--leasecheck-excuse` and failure "
            "files use, the exception a broken one raises, and the family of properties "
            "judged together (ownership, finality, hidden claims, delivery).",
            "",
            _table(["property", "raised as", "family", "what holds"], rows),
        ]
    )


def _commands(parser: argparse.ArgumentParser, declared: Declarations) -> str:
    shared = {flags[0]: attrs.get("help") for flags, attrs in declared.options}
    blocks = ["## Commands and exit codes", _text(parser.description or "")]
    blocks += _arguments(parser, shared)
    for path, command, summary in _subcommands(parser, (parser.prog,)):
        blocks += [f"### `{' '.join(path)}`", _text(command.description or summary or "")]
        blocks += _arguments(command, shared)
    codes = [[_code(str(code)), _cell(meaning)] for code, meaning in sorted(cli.EXIT_CODES.items())]
    blocks += ["### Exit codes", _table(["code", "meaning"], codes)]
    return "\n\n".join(block for block in blocks if block)


def _subcommands(
    parser: argparse.ArgumentParser, path: Flags
) -> Iterator[tuple[Flags, argparse.ArgumentParser, str | None]]:
    """Yield every subcommand, depth first in declaration order, with its one-line help."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {a.dest: a.help for a in action._choices_actions}
            for name, command in action.choices.items():
                yield (*path, name), command, summaries.get(name)
                yield from _subcommands(command, (*path, name))


def _arguments(parser: argparse.ArgumentParser, shared: dict[str, object]) -> list[str]:
    """Return a command's arguments as a table (none if it has none); the plugin's
    options, declared once, are one line in all, with the other names they go by."""
    rows, plugins, aliases = [], [], []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        flags = tuple(action.option_strings)
        if flags and flags[0] in shared and action.help == shared[flags[0]]:
            plugins.append(flags[0])
            aliases += [f"`{alias}` for `{flags[0]}`" for alias in flags[1:]]
            continue
        name = _argument(flags or (_metavar(action),), vars(action), positional=not flags)
        default = "required" if action.required and flags else _default(action.default)
        rows.append([_code(name), default, _cell(action.help or "")])
    if plugins:
        which = "every option" if set(plugins) == set(shared) else ", ".join(map(_code, plugins))
        also = f"; also {', '.join(aliases)}" if aliases else ""
        rows.append(["the plugin's", "", f"{which} under [Options](#options){also}"])
    return [_table(["argument", "default", "help"], rows)] if rows else []


def _contract() -> str:
    """The Queue protocol's members, read from the class itself so that a member added
    there is listed; the optional ones are the fields of `Capabilities`."""
    required = [
        f"- `{name}: {_annotation(kind)}`" for name, kind in contract.Queue.__annotations__.items()
    ]
    for name, member in vars(contract.Queue).items():
        if inspect.isfunction(member) and not name.startswith("_"):
            doc = (member.__doc__ or "").strip().splitlines()
            required.append(f"- `{name}{_signature(member)}`" + (f": {doc[0]}" if doc else ""))
    said = _capabilities()
    optional = []
    for capability in dataclasses.fields(contract.Capabilities):
        if capability.name not in said:
            raise LookupError(
                f"Capabilities.{capability.name} has no `- {capability.name}: ...` line in "
                "the Capabilities docstring, which documents each optional member"
            )
        kind = _annotation(capability.type)
        optional.append(f"- `{capability.name}: {kind}`: {_text(said[capability.name])}")
    return "\n".join(
        [
            "## The contract",
            "",
            inspect.getdoc(contract) or "",
            "",
            f"`Claim`: {inspect.getdoc(contract.Claim) or ''}",
            "",
            "### Required members",
            "",
            f"Members of the `{contract.Queue.__name__}` protocol, every one required.",
            "",
            *required,
            "",
            "### Optional members",
            "",
            "Attributes a queue may declare, as the suite reads them (`Capabilities`); one "
            "left out takes its default.",
            "",
            *optional,
        ]
    )


def _capabilities() -> dict[str, str]:
    """Return each capability's description, from the bullet lines of the Capabilities
    docstring: a dataclass field keeps no docstring of its own at runtime."""
    doc = inspect.getdoc(contract.Capabilities) or ""
    found = re.finditer(r"^- `(\w+)`: (.*?)(?=^- |\Z)", doc, re.MULTILINE | re.DOTALL)
    return {m[1]: " ".join(m[2].split()) for m in found}


# ---------------------------------------------------------------------------- Markdown


def _argument(flags: Flags, attrs: dict[str, Any], positional: bool = False) -> str:
    """Return how an argument is written: its names and what value it takes."""
    if positional:
        nargs = attrs.get("nargs")
        return f"[{flags[0]}]" if nargs == "?" else f"{flags[0]} ..." if nargs == "+" else flags[0]
    if attrs.get("nargs") == 0 or attrs.get("action") in ("store_true", "version"):
        return ", ".join(flags)
    choices = attrs.get("choices")
    named = attrs.get("metavar") or _dest(attrs.get("dest") or flags[0]).upper()
    taken = "{" + ",".join(map(str, choices)) + "}" if choices else named
    return f"{', '.join(flags)} {taken}"


def _metavar(action: argparse.Action) -> str:
    metavar = action.metavar
    return metavar if isinstance(metavar, str) else action.dest.upper()


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _default(value: object) -> str:
    """Return a default as a table cell, as written on the command line; '' for none."""
    if value is None or value is False or value == [] or value is argparse.SUPPRESS:
        return ""
    return _code(str(value))


def _signature(function: Callable[..., object]) -> str:
    """Return `(params) -> returns` without `self`, annotations as written."""
    signature = inspect.signature(function)
    params = list(signature.parameters.values())[1:]
    written = ", ".join(f"{p.name}: {_annotation(p.annotation)}" for p in params)
    return f"({written}) -> {_annotation(signature.return_annotation)}"


def _annotation(annotation: object) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _text(text: str) -> str:
    """Return `text` for Markdown: `*` and `<` outside code spans are literal."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("*", r"\*").replace("<", "&lt;")
    return "`".join(parts)


def _cell(text: str) -> str:
    return _text(" ".join(text.split())).replace("|", r"\|")


def _code(text: str) -> str:
    return "`" + text.replace("|", r"\|") + "`"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


# ----------------------------------------------------------------------------- command


def main(argv: Sequence[str] | None = None) -> int:
    """Print the page, or with `--check PATH` say in one line whether PATH is stale."""
    parser = argparse.ArgumentParser(prog=COMMAND, description="Print docs/reference.md.")
    parser.add_argument(
        "--check",
        type=Path,
        metavar="PATH",
        help="print nothing; exit 1 with one line if PATH is not what this would print",
    )
    args = parser.parse_args(argv)
    page = reference()
    if args.check is None:
        sys.stdout.write(page)
        return 0
    try:
        current = args.check.read_text(encoding="utf-8")
    except OSError:
        current = None
    if current != page:
        print(f"{args.check} is out of date: run {COMMAND} > {args.check}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
