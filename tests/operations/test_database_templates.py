"""Two checkouts on one PostgreSQL server (issue 22): a run never drops the template another checkout clones from.
The newest templates stay, an older one in use stays, the rest go."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from django.db import connection

from tests.database_template import database_at, database_names, drop_old_templates, state_template


@pytest.fixture
def server_databases(db):
    prefix = f"test_oldtemplates_{uuid.uuid4().hex[:8]}_"
    yield prefix
    with connection._nodb_cursor() as cursor:
        for name in database_names(cursor, f"{prefix}%"):
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_only_templates_beyond_the_newest_are_dropped_and_never_one_in_use(server_databases):
    prefix = server_databases
    names = [f"{prefix}{n}" for n in range(5)]  # created oldest first
    with connection._nodb_cursor() as cursor:
        for name in names:
            cursor.execute(f'CREATE DATABASE "{name}"')
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params["dbname"] = names[0]
    with psycopg.connect(**params, autocommit=True):  # another checkout, cloning from the oldest right now
        with connection._nodb_cursor() as cursor:
            drop_old_templates(cursor, prefix=prefix, kept=2)
            left = database_names(cursor, f"{prefix}%")
    assert left == sorted([names[0], names[3], names[4]])


@pytest.mark.django_db(transaction=True)
def test_a_database_at_an_earlier_state_is_a_clone_of_its_own_and_the_test_database_is_untouched():
    """`database_at` (the tests of migrations): the connection points at a database of that state in the block, and
    at the test's own, on the latest schema, after it; the clone is gone, and the template of the state is made once
    and cloned again the next time."""
    original = connection.settings_dict["NAME"]
    before = [("subtlebench", "0002_tokens_expire")]  # the migration before the table of beat's ticks
    templates = []
    for _ in range(2):
        with database_at(before) as name:
            assert connection.settings_dict["NAME"] == name != original
            tables = connection.introspection.table_names()
            assert "subtlebench_apitoken" in tables and "subtlebench_tick" not in tables
        assert connection.settings_dict["NAME"] == original
        assert "subtlebench_tick" in connection.introspection.table_names()
        with connection._nodb_cursor() as cursor:
            assert database_names(cursor, name) == []
            cursor.execute("SELECT oid FROM pg_database WHERE datname = %s", [state_template(before)])
            templates.append(cursor.fetchall())
    assert len(templates[0]) == 1 and templates[1] == templates[0]
