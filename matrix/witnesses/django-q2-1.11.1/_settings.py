"""The witness project's Django settings: django-q2's ORM broker on the witness's database.

A project as django-q2's docs set one up for the ORM broker (`django_q` in
INSTALLED_APPS, `Q_CLUSTER["orm"] = "default"`), on Django's own PostgreSQL backend: the
witness runs django-q2's real `qcluster` processes, each with connections of its own.
`retry` is shorter than a user's so the witness takes seconds, and obeys the docs'
rule (timeout below retry, every task shorter than timeout); one worker per cluster.
The database is the one the witness runner made, named by `$WITNESS_DSN`.
"""

import os

from psycopg.conninfo import conninfo_to_dict

_params = {k: str(v) for k, v in conninfo_to_dict(os.environ["WITNESS_DSN"]).items()}

SECRET_KEY = "leasecheck-witness"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["django_q"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _params.pop("dbname"),
        "OPTIONS": _params,
    }
}
Q_CLUSTER = {
    "name": "witness",
    "orm": "default",
    "workers": 1,
    "retry": 4,
    "timeout": 3,
    "max_attempts": int(os.environ.get("WITNESS_MAX_ATTEMPTS", "3")),
    "poll": 0.1,
}
