"""Two checkouts on one PostgreSQL server (issue 22): a run never drops the template another checkout clones from.
The newest templates stay, an older one in use stays, the rest go."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from django.db import connection

from tests.database_template import database_names, drop_old_templates


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
