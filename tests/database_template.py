"""The test databases, cloned from a migrated template: migrations run once for each state of the migrations, not
once for every xdist worker and every run.

The template's name carries a digest of every migration file and of Django's version, so a changed migration makes
a new template. A template is built under another name and renamed when complete, so one that exists is whole; its
building and every clone run under an advisory lock, so workers that start together wait for the one that builds.

Several checkouts may share one server (worktrees, or runs pointed at one DATABASE_URL), each with its own
migrations: the newest TEMPLATES_KEPT templates stay, so that a checkout never drops the template another one is
cloning from; older ones are dropped without FORCE, so a template in use right now is left for a later run.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from pathlib import Path

import django
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.db import DatabaseError, connection

TEMPLATE_PREFIX = "test_template_"
STATE_PREFIX = "test_state_"  # templates at an earlier state of the migrations (`database_at`)
TEMPLATES_KEPT = 4
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


def build_template(cursor, template: str, migrate, source: str | None = None) -> None:
    """Make `template`: a new database (empty, or a clone of `source`) in which `migrate()` runs on the connection,
    built under a name of its own and renamed when complete."""
    building = f"{template}_building"
    cursor.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')  # this template's build, cut short
    cursor.execute(f'CREATE DATABASE "{building}"' + (f' TEMPLATE "{source}"' if source else ""))
    original = connection.settings_dict["NAME"]
    use_database(building)
    try:
        migrate()
    finally:
        use_database(original)
    cursor.execute(f'ALTER DATABASE "{building}" RENAME TO "{template}"')


def clone(cursor, template: str, name: str) -> None:
    """A fresh database `name`, a copy of `template` (one left by an earlier run is dropped first)."""
    cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    cursor.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


def drop_old_templates(cursor, prefix: str = TEMPLATE_PREFIX, kept: int = TEMPLATES_KEPT) -> None:
    """Drop the templates (and cut-short builds) older than the newest `kept`; one that a connection uses (another
    checkout cloning or building it) is left alone."""
    cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s ORDER BY oid DESC", [f"{prefix}%"])
    for (old,) in cursor.fetchall()[kept:]:
        try:
            cursor.execute(f'DROP DATABASE IF EXISTS "{old}"')
        except DatabaseError:  # in use: kept for now
            pass


def migrate_from_scratch() -> None:
    call_command("migrate", verbosity=0, interactive=False, run_syncdb=True)


def current_template(cursor) -> str:
    """The template of the current migrations, built from scratch if it is not there yet (the caller holds the lock);
    templates beyond the newest few are dropped then."""
    template = f"{TEMPLATE_PREFIX}{migrations_digest()}"
    if template not in database_names(cursor, template):
        build_template(cursor, template, migrate_from_scratch)
        drop_old_templates(cursor)
    return template


def state_template(targets: list[tuple[str, str]]) -> str:
    """The name of the template at the state `targets` of the current migrations."""
    state = hashlib.sha256(repr(sorted(targets)).encode()).hexdigest()[:8]
    return f"{STATE_PREFIX}{migrations_digest()}_{state}"


def migrate(targets: list[tuple[str, str]]):
    """Migrate the connection's database to `targets` (forward or back); the apps of that state, for a test of a
    migration to make and read rows as they were then."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def latest_migrations() -> list[tuple[str, str]]:
    """Every app's last migration: what a test of a migration goes back to, for the next test's flush."""
    from django.db.migrations.executor import MigrationExecutor

    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def state_source(targets: list[tuple[str, str]], cursor) -> str | None:
    """What a template at `targets` is built from: None (an empty database migrated forward) or the current template
    (migrated back), whichever takes fewer seconds. Unapplying a migration costs Django about three times what
    applying one does (it clones the rendered state for every operation): back from the current schema to a state
    from before releases took 18 s of CPU here, forward from nothing to it 7 s; one or two steps back is cheaper."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    forward = executor.migration_plan(targets, clean_start=True)
    executor.loader.applied_migrations = dict.fromkeys(executor.loader.graph.nodes)
    backward = executor.migration_plan(targets)
    return None if len(forward) < 3 * len(backward) else current_template(cursor)


@contextmanager
def database_at(targets: list[tuple[str, str]]):
    """A database of its own at the state `targets` of the migrations (as MigrationExecutor takes them), for a test
    of a migration: the connection points at it in the block and back at the test's own after it, and it is dropped.
    It is a clone of a template at that state, made once for each state of the migrations (from nothing or from the
    current template, whichever is quicker: state_source) and kept like the others."""
    from django.db.migrations.executor import MigrationExecutor

    template = state_template(targets)
    target = f"{connection.creation._get_test_db_name()}_{template.rsplit('_', 1)[-1]}"
    original = connection.settings_dict["NAME"]
    connection.close()
    with server_cursor() as cursor:
        if template not in database_names(cursor, template):

            def migrate_to_state():
                MigrationExecutor(connection).migrate(targets)

            build_template(cursor, template, migrate_to_state, source=state_source(targets, cursor))
            drop_old_templates(cursor, prefix=STATE_PREFIX)
        clone(cursor, template, target)
    use_database(target)
    try:
        yield target
    finally:
        use_database(original)
        drop_test_database(target)


def create_test_database() -> str:
    """This process's test database (pytest-django's name for it, with the xdist worker's suffix), a fresh clone of
    the current template; the connection points at it. Returns its name."""
    target = connection.creation._get_test_db_name()
    connection.close()
    with server_cursor() as cursor:
        clone(cursor, current_template(cursor), target)
    use_database(target)
    return target


def drop_test_database(name: str) -> None:
    connection.close()
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def create_empty_database(name: str) -> None:
    """Another database of the current schema with no rows but what migrate makes (a restore's target): a clone of
    the template, as fresh as `migrate` on a new server would leave it."""
    with server_cursor() as cursor:
        clone(cursor, current_template(cursor), name)


def drop_database(name: str) -> None:
    """Drop a database other than the test's own (the test's connection and transaction stay as they are)."""
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
