"""Read a query's SQL text the way PostgreSQL and psycopg will: statements and parameters.

A queue file's query may hold several statements, and psycopg can bind parameters only
into one statement at a time, so the SQL-file adapter splits a query at the semicolons
that end statements: those outside quoted strings ('...', E'...'), quoted identifiers,
dollar quotes ($tag$...$tag$) and comments (-- and nested /* */). A `BEGIN ATOMIC`
function body is not tracked (its inner semicolons would split it): keep one in a query
that names no parameter, which runs as written, unsplit.

Placeholders are found as psycopg finds them, in the whole text and blind to quoting:
`%(name)s` (or `b`, `t`) is a parameter, `%%` a literal percent sign.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_WORD = re.compile(r"[A-Za-z0-9_$]")
_PERCENT = re.compile(r"%(?:\(([^)]*)\))?(.?)", re.DOTALL)


def statements(text: str) -> list[str]:
    """Return the statements of `text` in order, without their semicolons; empty ones
    (only whitespace and comments) are dropped."""
    parts: list[str] = []
    start = i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == ";":
            parts.append(text[start:i])
            start = i = i + 1
        elif c == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif c == "/" and text.startswith("/*", i):
            i = _block_comment_end(text, i)
        elif c == "'":
            escaped = i > 0 and text[i - 1] in "eE" and (i < 2 or not _WORD.match(text[i - 2]))
            i = _quoted_end(text, i, "'", backslash=escaped)
        elif c == '"':
            i = _quoted_end(text, i, '"', backslash=False)
        elif c == "$" and (i == 0 or not _WORD.match(text[i - 1])):
            tag = _DOLLAR.match(text, i)
            if tag is None:
                i += 1
            else:
                end = text.find(tag.group(0), tag.end())
                i = n if end < 0 else end + len(tag.group(0))
        else:
            i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if not _blank(p)]


def _block_comment_end(text: str, i: int) -> int:
    depth, i = 1, i + 2
    while i < len(text) and depth:
        if text.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*/", i):
            depth, i = depth - 1, i + 2
        else:
            i += 1
    return i


def _quoted_end(text: str, i: int, quote: str, *, backslash: bool) -> int:
    i += 1
    while i < len(text):
        c = text[i]
        if backslash and c == "\\":
            i += 2
        elif c == quote:
            if text.startswith(quote * 2, i):
                i += 2
            else:
                return i + 1
        else:
            i += 1
    return i


def _blank(statement: str) -> bool:
    """True when `statement` holds nothing but whitespace and comments."""
    rest = statement.strip()
    while rest:
        if rest.startswith("--"):
            end = rest.find("\n")
            rest = "" if end < 0 else rest[end + 1 :].strip()
        elif rest.startswith("/*"):
            rest = rest[_block_comment_end(rest, 0) :].strip()
        else:
            return False
    return True


@dataclass(frozen=True)
class Placeholders:
    """What a query's `%` signs are, read as psycopg reads them."""

    names: frozenset[str]
    """The parameters it names, `%(name)s`."""
    problems: tuple[str, ...]
    """Each `%` psycopg would refuse once parameters are bound: `%s` or a lone `%`."""


def placeholders(text: str) -> Placeholders:
    """Return the named parameters of `text` and the `%` signs that would not bind."""
    names: set[str] = set()
    problems: list[str] = []
    for match in _PERCENT.finditer(text):
        name, kind = match.group(1), match.group(2)
        if match.group(0) == "%%":
            continue
        if name is not None and kind in ("s", "b", "t"):
            names.add(name)
        else:
            problems.append(match.group(0))
    return Placeholders(names=frozenset(names), problems=tuple(problems))
