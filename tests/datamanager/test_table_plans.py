"""The data manager's tables read their default and common sorts from an index: PostgreSQL's plan of each page's
query has no Sort node of its own (a NULLS LAST on a NOT NULL column, or a missing index, puts one there and the
page sorts every row). Checked on a small table with sequential scans and sorts off, so the planner shows what it
can use whatever the rows' count. The videos table reads its people's roles in one query, however many there are."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotator.datamanager.tables import CANDIDATES, CAPTIONS, PAGE_SIZE, PAIRS, VIDEOS
from annotator.models import Caption, Pair
from tests.conftest import make_user
from tests.factories import make_pair

SORTS = [
    (PAIRS, ""),  # the landing page: the default sort, -id
    (PAIRS, "id"),
    (PAIRS, "-created"),
    (VIDEOS, ""),
    (VIDEOS, "id"),
    (CAPTIONS, ""),
    (CAPTIONS, "id"),
    (CANDIDATES, ""),  # -similarity
    (CANDIDATES, "-id"),
]


def own_nodes(plan: dict):
    """The plan's nodes, without those of its subplans (a row's subquery may sort its own few rows)."""
    yield plan
    for child in plan.get("Plans", []):
        if child.get("Parent Relationship") not in ("SubPlan", "InitPlan"):
            yield from own_nodes(child)


def page_plan(table, sort: str) -> dict:
    state = table.parse({"sort": sort} if sort else {})
    rows = table.queryset(state)[:PAGE_SIZE]  # the first page, as the paginator reads it
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        # A plan that sorts is only taken where nothing else gives the order: what the planner can use, at any size.
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        (explained,) = cursor.fetchone()
    return explained[0]["Plan"]


@pytest.mark.parametrize(("table", "sort"), SORTS, ids=[f"{t.name}:{s or 'default'}" for t, s in SORTS])
def test_each_default_and_common_sort_reads_an_index_instead_of_sorting(db, annotator, table, sort):
    pair = make_pair(status=Pair.Status.SUBMITTED, author=annotator)
    Caption.objects.create(pair=pair, author=annotator, text="The cup moved.", status="submitted")
    plan = page_plan(table, sort)
    nodes = [node["Node Type"] for node in own_nodes(plan)]
    assert plan["Node Type"] == "Limit" and not [n for n in nodes if "Sort" in n], nodes


def test_the_videos_page_reads_every_users_roles_in_one_query(client_for, coordinator, annotator):
    client = client_for(coordinator)
    client.get("/tables/videos/")  # the session's first queries (login) are not the page's

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/tables/videos/").status_code == 200
        return len(captured)

    before = queries()
    for n in range(5):
        make_user(f"extra{n}", "annotator")
    page = client.get("/tables/videos/").content.decode()
    assert queries() == before and "extra4" in page
