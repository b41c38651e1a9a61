"""Django configured once per test process, the same way for every Django test module.

Django's settings are global: the django-tasks-db adapter configures them on import
(and checks that what it finds has django-tasks-db), so where that library is
installed the tests let the adapter do it; elsewhere only the database backend is
configured. Import this module only after `pytest.importorskip("django")`.
"""

from __future__ import annotations

import importlib.util

import django
from django.conf import settings

from leasecheck.adapters.django import ENGINE


def configure() -> None:
    """Configure Django for the tests, unless this process already did."""
    if importlib.util.find_spec("django_tasks_db") is not None:
        import leasecheck.adapters.django_tasks_db_queue  # noqa: F401  (it configures Django)

        return
    if not settings.configured:
        settings.configure(DATABASES={"default": {"ENGINE": ENGINE, "NAME": "leasecheck"}})
    django.setup()
