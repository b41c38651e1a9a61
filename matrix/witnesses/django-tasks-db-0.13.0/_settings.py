"""The witness project's Django settings: django-tasks-db on the witness's database.

A project as django-tasks-db's README sets one up (`django_tasks_db` in
INSTALLED_APPS, a `default` task backend of `django_tasks_db.DatabaseBackend`), on
Django's own PostgreSQL backend: the witness runs django-tasks-db's real `db_worker`
processes, each with connections of its own. The database is the one the witness
runner made, named by `$WITNESS_DSN`. `DEBUG` is off, so `db_worker` does not reload.
"""

import os

from psycopg.conninfo import conninfo_to_dict

_params = {k: str(v) for k, v in conninfo_to_dict(os.environ["WITNESS_DSN"]).items()}

SECRET_KEY = "leasecheck-witness"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["django_tasks", "django_tasks_db"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _params.pop("dbname"),
        "OPTIONS": _params,
    }
}
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
