"""Each property is written once (`properties.REGISTRY`): README's table and
docs/properties.md say what it says, so a property's words cannot drift apart between
the front door, the docs and the reference (no database: each test reads text only)."""

from __future__ import annotations

from pathlib import Path

from leasecheck.stateful import properties

ROOT = Path(__file__).resolve().parent.parent


def _rows(text: str) -> list[list[str]]:
    """Return the body rows of the first Markdown table in `text`, cell by cell."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|---"))
    body = []
    for line in lines[start + 1 :]:
        if not line.startswith("| "):
            break
        body.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return body


def test_readme_says_what_the_registry_says() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text[text.index("## What it judges") :]
    assert _rows(table) == [[p.id, p.brief] for p in properties.REGISTRY]


def test_the_properties_page_says_what_the_registry_says() -> None:
    text = (ROOT / "docs" / "properties.md").read_text(encoding="utf-8")
    expected = [[p.id, p.detail, p.checked_from] for p in properties.REGISTRY]
    assert _rows(text) == expected


def test_every_property_has_one_entry_in_a_family() -> None:
    ids = [p.id for p in properties.REGISTRY]
    assert len(ids) == len(set(ids)) == len(properties.ALL)
    assert {p.family for p in properties.REGISTRY} == set(properties.FAMILIES)
