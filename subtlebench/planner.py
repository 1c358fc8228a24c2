"""The planner's statistics after a bulk write. A table that has just taken tens of thousands of rows (a model run's
results, a release's items) has no statistics for them until autovacuum comes by: the planner then takes a run's
50,000 results for a handful and joins them with nested loops (the release report's first view took 75 s of database
time, its model row 49 s: bench/README.md, "Release report figures"). The paths that write such batches ANALYZE what
they wrote once it is committed."""

from __future__ import annotations

from django.db import connection, transaction


def analyze_on_commit(*models) -> None:
    """ANALYZE the tables of `models` once the current transaction commits (now, outside one): ANALYZE samples a
    bounded number of rows (300 x default_statistics_target), whatever the table's size."""

    def analyze():
        with connection.cursor() as cursor:
            for model in models:
                cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")

    transaction.on_commit(analyze)
