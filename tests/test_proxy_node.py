"""A client in another language, stepped by the proxy: node-postgres, one round trip at a time.

The proxy never looks at who speaks: a Node.js process on the endpoint's port is held
at each of its round trips as a psycopg one is, its transaction open (and nothing of it
committed) while a later statement waits at the gate. It runs in a process of its own,
as any client in another language does. Without node or npm the test skips, naming what
is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from leasecheck.proxy import Proxy
from matrix import npm

PIN = "pg@8.16.3"
"""node-postgres, the client most Node.js queues (graphile-worker, pg-boss) run on."""
REPO = Path(__file__).resolve().parent.parent
WAIT = 60.0
SCRIPT = """
const { Client } = require("pg");
(async () => {
  const client = new Client();  // PGHOST, PGPORT, PGUSER, PGDATABASE from the environment
  await client.connect();
  await client.query("begin");
  await client.query("insert into node_rows values ($1, $2)", [1, "node"]);
  await client.query("commit");
  const counted = await client.query("select count(*)::int as n from node_rows");
  console.log(JSON.stringify(counted.rows[0]));
  await client.end();
})().catch((error) => { console.error(error.message); process.exit(1); });
"""


@pytest.fixture(scope="module")
def node_modules() -> Path:
    reason = npm.missing_tools()
    if reason is not None:
        pytest.skip(reason)
    root = Path(os.environ.get("LEASECHECK_NPM_DIR") or REPO / ".leasecheck" / "npm")
    try:
        return npm.ensure(PIN, root)
    except npm.NpmError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def direct(leasecheck_database: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(leasecheck_database, autocommit=True) as conn:
        conn.execute("drop table if exists node_rows")
        conn.execute("create table node_rows (id int primary key, note text)")
        yield conn
        conn.execute("drop table node_rows")


def test_a_node_client_is_held_at_each_round_trip(
    node_modules: Path, leasecheck_database: str, direct: psycopg.Connection[Any]
) -> None:
    with Proxy(leasecheck_database) as proxy:
        endpoint = proxy.endpoint("node")
        endpoint.stepped = True
        base = conninfo_to_dict(leasecheck_database)
        env = {
            **os.environ,
            "NODE_PATH": str(node_modules),
            "PGHOST": "127.0.0.1",
            "PGPORT": str(endpoint.port),
            "PGUSER": str(base.get("user") or os.environ.get("USER", "postgres")),
            "PGDATABASE": str(base["dbname"]),
        }
        env.pop("PGPASSWORD", None)
        node = subprocess.Popen(
            ["node", "-e", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            released = []
            for _ in range(4):
                session = endpoint.wait_held(WAIT)
                statement = session.statement or ""
                if statement.startswith("commit"):
                    # The INSERT ran inside the transaction: nothing of it shows yet.
                    assert session.in_transaction
                    assert direct.execute("select count(*) from node_rows").fetchone() == (0,)
                released.append(statement)
                session.release()
            out, err = node.communicate(timeout=WAIT)
        finally:
            if node.poll() is None:
                node.kill()
                node.wait()
        assert node.returncode == 0, err.decode()
        assert json.loads(out) == {"n": 1}
        assert released == [
            "begin",
            "insert into node_rows values ($1, $2)",
            "commit",
            "select count(*)::int as n from node_rows",
        ]
        assert proxy.errors == []
    assert direct.execute("select note from node_rows").fetchall() == [("node",)]
