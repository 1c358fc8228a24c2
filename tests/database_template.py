"""The test databases, cloned from a migrated template: migrations run once for each state of the migrations, not
once for every xdist worker and every run.

The template's name carries a digest of every migration file and of Django's version, so a changed migration makes
a new template (the old ones are dropped). A template is built under another name and renamed when complete, so
one that exists is whole; its building and every clone run under an advisory lock, so workers that start together
wait for the one that builds.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from pathlib import Path

import django
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.db import connection

TEMPLATE_PREFIX = "test_template_"
LOCK_KEY = 7_316_202_612  # any fixed number: the advisory lock of the test databases


def migrations_digest() -> str:
    digest = hashlib.sha256(django.get_version().encode())
    for app_config in sorted(apps.get_app_configs(), key=lambda config: config.label):
        for path in sorted((Path(app_config.path) / "migrations").glob("*.py")):
            digest.update(f"{app_config.label}/{path.name}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@contextmanager
def server_cursor():
    """A cursor on the server's maintenance database, outside any test database, holding the advisory lock."""
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        try:
            yield cursor
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])


def database_names(cursor, pattern: str) -> list[str]:
    cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s ORDER BY datname", [pattern])
    return [name for (name,) in cursor.fetchall()]


def use_database(name: str) -> None:
    connection.close()
    settings.DATABASES[connection.alias]["NAME"] = name
    connection.settings_dict["NAME"] = name


def build_template(cursor, template: str) -> None:
    """Migrate a new database from scratch and rename it to `template`; drop the templates of other digests."""
    for old in database_names(cursor, f"{TEMPLATE_PREFIX}%"):  # other digests, and a build that was cut short
        cursor.execute(f'DROP DATABASE IF EXISTS "{old}" WITH (FORCE)')
    building = f"{template}_building"
    cursor.execute(f'CREATE DATABASE "{building}"')
    original = connection.settings_dict["NAME"]
    use_database(building)
    try:
        call_command("migrate", verbosity=0, interactive=False, run_syncdb=True)
    finally:
        use_database(original)
    cursor.execute(f'ALTER DATABASE "{building}" RENAME TO "{template}"')


def create_test_database() -> str:
    """This process's test database (pytest-django's name for it, with the xdist worker's suffix), a fresh clone of
    the current template; the connection points at it. Returns its name."""
    template = f"{TEMPLATE_PREFIX}{migrations_digest()}"
    target = connection.creation._get_test_db_name()
    connection.close()
    with server_cursor() as cursor:
        if template not in database_names(cursor, template):
            build_template(cursor, template)
        cursor.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')
        cursor.execute(f'CREATE DATABASE "{target}" TEMPLATE "{template}"')
    use_database(target)
    return target


def drop_test_database(name: str) -> None:
    connection.close()
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def create_empty_database(name: str) -> None:
    """Another database of the current schema with no rows but what migrate makes (a restore's target): a clone of
    the template, as fresh as `migrate` on a new server would leave it."""
    template = f"{TEMPLATE_PREFIX}{migrations_digest()}"
    with server_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        cursor.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


def drop_database(name: str) -> None:
    """Drop a database other than the test's own (the test's connection and transaction stay as they are)."""
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
