"""The project's pytest configuration, as far as leasecheck's settings go.

`leasecheck check` runs pytest isolated from the project's configuration, so the two
settings it keeps (`leasecheck_queue`, `leasecheck_regressions`) are read here from the
file pytest itself would read, found the way pytest finds it.
"""

from __future__ import annotations

import configparser
import contextlib
import shlex
import tomllib
from pathlib import Path
from typing import Any


class Config:
    """The project's pytest configuration file, as far as leasecheck's settings go."""

    def __init__(self, path: Path, values: dict[str, Any]) -> None:
        self.path = path
        self.values = values


_SECTIONS = {
    "pytest.toml": ("toml", ("pytest",)),
    ".pytest.toml": ("toml", ("pytest",)),
    "pytest.ini": ("ini", "pytest"),
    ".pytest.ini": ("ini", "pytest"),
    "pyproject.toml": ("toml", ("tool", "pytest")),
    "tox.ini": ("ini", "pytest"),
    "setup.cfg": ("ini", "tool:pytest"),
}
"""The files pytest reads its configuration from, in the order it looks for them."""


def find(start: Path) -> Config | None:
    """Return the configuration pytest would read for a run started in `start`."""
    for base in (start, *start.parents):
        for name, (kind, where) in _SECTIONS.items():
            path = base / name
            if not path.is_file():
                continue
            values = _read(path, kind, where)
            if values is not None:
                return Config(path, values)
            if name in ("pytest.ini", ".pytest.ini"):
                return Config(path, {})  # pytest.ini counts even when it is empty
    return None


def _read(path: Path, kind: str, where: object) -> dict[str, Any] | None:
    try:
        if kind == "ini":
            parser = configparser.ConfigParser(interpolation=None)
            parser.read(path, encoding="utf-8")
            assert isinstance(where, str)
            return dict(parser[where]) if parser.has_section(where) else None
        data: Any = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, configparser.Error, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    assert isinstance(where, tuple)
    for key in where:
        data = data.get(key) if isinstance(data, dict) else None
    if not isinstance(data, dict):
        return None
    ini_options = data.get("ini_options")
    return {**data, **ini_options} if isinstance(ini_options, dict) else data


def value(project: Config | None, name: str) -> str | None:
    """Return a setting's value (a list's first item), or None when unset or blank."""
    value = None if project is None else project.values.get(name)
    if isinstance(value, list):
        value = value[0] if value else None
    return str(value).strip() or None if value is not None else None


def path(project: Config | None, name: str) -> str | None:
    """Return a `paths` setting's first path, relative to the file that sets it."""
    if project is None or name not in project.values:
        return None
    value = project.values[name]
    words = shlex.split(value) if isinstance(value, str) else [str(v) for v in value]
    if not words:
        return None
    found = project.path.parent / words[0]
    with contextlib.suppress(ValueError):
        return str(found.relative_to(Path.cwd()))
    return str(found)
