"""A queue kept as one `.sql` file (`queue.sql`), run with `leasecheck check --sql`.

A bug is a small file in `variants/` that holds only the blocks it changes and a
`name=` header; `write_variant` lays it over the clean file, block by block, and
writes the whole file a run is given (a queue file is one file).
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent
CLEAN = HERE / "queue.sql"
VARIANTS = {path.stem.replace("_", "-"): path for path in sorted(HERE.glob("variants/*.sql"))}
_BLOCK = re.compile(r"^(?=-- name: )", re.MULTILINE)
_NAME = re.compile(r"^(-- leasecheck:.*?\bname=)(\S+)", re.MULTILINE)


def _split(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Return the header and the (query name, block text) pairs of a queue file."""
    header, *blocks = _BLOCK.split(text)
    return header, [
        (block.split("\n", 1)[0].removeprefix("-- name: ").strip(), block) for block in blocks
    ]


def variant_text(variant: str) -> str:
    """Return the clean file with `variant`'s blocks in place of its own, and its name."""
    header, blocks = _split(CLEAN.read_text())
    patch_header, patch_blocks = _split(VARIANTS[variant].read_text())
    changed = dict(patch_blocks)
    missing = sorted(set(changed) - {name for name, _ in blocks})
    if missing:
        raise ValueError(f"{VARIANTS[variant]}: no block {', '.join(missing)} in {CLEAN.name}")
    named = _NAME.search(patch_header)
    if named is None:
        raise ValueError(f"{VARIANTS[variant]}: give the variant a '-- leasecheck: name=' line")
    header = _NAME.sub(lambda m: m.group(1) + named.group(2), header, count=1)
    bug = "".join(
        ln + "\n" for ln in patch_header.splitlines() if not ln.startswith("-- leasecheck:")
    )
    body = "".join(changed.get(name, block) for name, block in blocks)
    return f"{bug}{header}{body}"


def write_variant(variant: str, directory: Path) -> Path:
    """Write `variant` as a whole queue file in `directory`; return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"visibility-{variant}.sql"
    path.write_text(variant_text(variant))
    return path
