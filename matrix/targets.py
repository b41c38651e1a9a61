"""The implementations the release matrix checks: one declarative table, fixed in one place.

A target with no `requirements` runs in the interpreter that runs the matrix (the
project is installed there); one with requirements gets a venv of its own, with the
project installed editable next to exactly those pins. `python` names the minor
version the library needs (oban needs 3.12); `env` is extra environment for the run.
`npm` lists pinned npm packages ("name@version") a Node.js queue's adapter reads its
SQL from; `matrix.npm` installs them, and the adapter finds its pin through
`LEASECHECK_NPM_PIN` in `env`.
`client` says what sends the library's statements: the harness's own psycopg
connection (an adapter calling the library's code, or replaying the SQL it builds, on
it), or the library's own client on connections it opens (`contract.Clients`), stepped
through the harness's proxy.
`control` targets are known-buggy queues the matrix runs only when named with
`--only`: they show the search still catches what they break. Their runs stay in the
run directory; they are never merged into the published tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

HARNESS = "the harness's psycopg connection"
"""The client of a column whose adapter runs the library's statements on the harness's
connection."""


@dataclass(frozen=True)
class Target:
    """One column of the matrix: a queue, the library it needs, and how to run it."""

    name: str
    queue: str
    requirements: tuple[str, ...] = ()
    python: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    control: bool = False
    npm: tuple[str, ...] = ()
    client: str = HARNESS

    @property
    def module_path(self) -> str:
        """Return the adapter's module as a path relative to the repository."""
        return self.queue.partition(":")[0].replace(".", "/") + ".py"


def _sql(file: str, *, control: bool = False) -> Target:
    return Target(
        name=file,
        queue="leasecheck.adapters.sqlfile_queue:from_env",
        env={"LEASECHECK_SQL_QUEUE": f"leasecheck/adapters/sql/{file}"},
        control=control,
    )


def _oban(version: str) -> Target:
    return Target(
        f"oban-{version}", "leasecheck.adapters.oban_queue:ObanQueue", (f"oban=={version}",), "3.12"
    )


def _chancy(version: str) -> Target:
    return Target(
        f"chancy-{version}", "leasecheck.adapters.chancy_queue:ChancyQueue", (f"chancy=={version}",)
    )


def _node(name: str, pin: str, queue: str, client: str = HARNESS) -> Target:
    return Target(name, queue, env={"LEASECHECK_NPM_PIN": pin}, npm=(pin,), client=client)


def _graphile(version: str, client: str | None = None) -> Target:
    pin = f"graphile-worker@{version}"
    if client is None:
        adapter = "leasecheck.adapters.graphile_worker_queue:GraphileWorkerQueue"
        return _node(f"graphile-worker-{version}", pin, adapter)
    adapter = "leasecheck.adapters.graphile_worker_node_queue:GraphileWorkerNodeQueue"
    return _node(f"graphile-worker-{version}-node", pin, adapter, client)


TARGETS: tuple[Target, ...] = (
    Target("reference", "leasecheck.reference.queue:ReferenceQueue"),
    _sql("reference.sql"),
    _sql("reference_v2.sql"),
    Target(
        "procrastinate-3.10",
        "leasecheck.adapters.procrastinate_queue:ProcrastinateQueue",
        ("procrastinate==3.10.*",),
    ),
    Target(
        "pgqueuer-1.6", "leasecheck.adapters.pgqueuer_queue:PgQueuerQueue", ("pgqueuer==1.6.*",)
    ),
    Target(
        "pgqueuer-1.6-asyncpg",
        "leasecheck.adapters.pgqueuer_asyncpg_queue:PgQueuerAsyncpgQueue",
        ("pgqueuer==1.6.*", "asyncpg==0.32.0"),
        client="its own asyncpg connection (pgqueuer's AsyncpgDriver)",
    ),
    _oban("0.7.0"),
    _oban("0.6.7"),
    _oban("0.6.3"),
    _chancy("0.26.0"),
    _chancy("0.25.1"),
    _graphile("0.18.0"),
    _graphile("0.13.0"),
    _graphile("0.18.0", "its own pg pool, in Node.js (its worker pool's batchGetJobs, ...)"),
    _node("pgboss-12.38.1", "pg-boss@12.38.1", "leasecheck.adapters.pgboss_queue:PgBossQueue"),
    _node(
        "pgboss-12.38.1-node",
        "pg-boss@12.38.1",
        "leasecheck.adapters.pgboss_node_queue:PgBossNodeQueue",
        client="its own node-postgres pool, in Node.js (pg-boss's public API)",
    ),
    Target("saq-0.26.4", "leasecheck.adapters.saq_queue:SaqQueue", ("saq[postgres]==0.26.4",)),
    Target(
        "django-tasks-db-0.13.0",
        "leasecheck.adapters.django_tasks_db_queue:DjangoTasksDbQueue",
        ("django-tasks-db==0.13.0", "django-tasks==0.12.0", "Django==5.2.19"),
    ),
    Target(
        "django-q2-1.11.1",
        "leasecheck.adapters.django_q2_queue:DjangoQ2Queue",
        ("django-q2==1.11.1", "django-picklefield==3.4.0", "Django==5.2.19"),
    ),
    Target(
        "absurd-0.5.1",
        "leasecheck.adapters.absurd_queue:AbsurdQueue",
        ("absurd-sdk==0.5.1", "absurdctl==0.5.1"),
    ),
    Target(
        "dramatiq-postgres-1.4.0",
        "leasecheck.adapters.dramatiq_postgres_queue:DramatiqPostgresQueue",
        ("dramatiq-postgres==1.4.0", "dramatiq==2.2.1"),
        client="its own psycopg_pool (dramatiq-postgres's make_pool)",
    ),
    Target(
        "dbos-3.4.0",
        "leasecheck.adapters.dbos_queue:DBOSQueue",
        ("dbos==3.4.0",),
        client="its own SQLAlchemy engine (its system database's)",
    ),
    _sql("naive.sql", control=True),
    _sql("heartbeat_only.sql", control=True),
    _sql("attempt_key.sql", control=True),
)


def select(only: list[str] | None) -> list[Target]:
    """Return the targets `--only` names (all non-control ones without it); raise on a typo."""
    if not only:
        return [t for t in TARGETS if not t.control]
    by_name = {t.name: t for t in TARGETS}
    unknown = [n for n in only if n not in by_name]
    if unknown:
        raise ValueError(
            f"--only {', '.join(unknown)}: no such implementation; choose from {', '.join(by_name)}"
        )
    return [by_name[n] for n in only]
