"""Splitting a query into statements and finding its parameters, as PostgreSQL and psycopg
read them: a semicolon inside quotes, dollar quotes or comments ends nothing."""

from __future__ import annotations

import pytest

from leasecheck.adapters.sqltext import placeholders, statements


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("select 1", ["select 1"]),
        ("select 1;\nselect 2;", ["select 1", "select 2"]),
        ("select ';' ; select 'it''s;'", ["select ';'", "select 'it''s;'"]),
        ("select E'\\';' ; select 2", ["select E'\\';'", "select 2"]),
        ("select '\\'; select 2", ["select '\\'", "select 2"]),
        ('select 1 as ";" ; select 2', ['select 1 as ";"', "select 2"]),
        ("create function f() returns int language sql as $$ select 1; $$; select f()",
         ["create function f() returns int language sql as $$ select 1; $$", "select f()"]),
        ("do $body$ begin perform 1; end $body$; select 2",
         ["do $body$ begin perform 1; end $body$", "select 2"]),
        ("select $1; select 2", ["select $1", "select 2"]),
        ("select a$b; select 2", ["select a$b", "select 2"]),
        ("select 1 -- a; comment\n; select 2", ["select 1 -- a; comment", "select 2"]),
        ("select /* a; /* nested; */ b; */ 1; select 2", ["select /* a; /* nested; */ b; */ 1",
                                                        "select 2"]),
        ("select 1; -- only a comment\n; /* and another */", ["select 1"]),
    ],
    ids=["one", "two", "quotes", "e-string", "plain-backslash", "identifier", "dollar",
         "tagged-dollar", "positional-dollar", "dollar-in-name", "line-comment",
         "nested-comment", "trailing-comments"],
)  # fmt: skip
def test_statements_split_only_at_statement_ends(text: str, expected: list[str]) -> None:
    assert statements(text) == expected


def test_placeholders_are_read_as_psycopg_reads_them() -> None:
    """Named ones are parameters, `%%` is a percent; psycopg is blind to quoting, so a
    placeholder inside a string literal is still one, and `%s` or a lone `%` is a problem."""
    marks = placeholders("select %(id)s, '%(worker)s', %%(not_one)s, 'a%%', %(x)b")
    assert marks.names == {"id", "worker", "x"}
    assert marks.problems == ()
    assert placeholders("select %s, 'a%'").problems == ("%s", "%'")
    assert placeholders("select 1").names == frozenset()
