"""Every order the app asks the database for is total: two rows never tie, so a page, an export or `.first()`
gives the same rows in the same order on any machine (issue 22).

PostgreSQL returns tied rows in whatever order its plan produces, which changes with the data, the statistics and
the version. An order is total when its keys cover a unique set of the model's fields (the primary key, a unique
field, a unique constraint), counting the fields a related manager or an equality filter pins to one value, and,
after `.values(...).annotate(...)`, the grouped fields. Orders this file cannot read (a key built at run time) are
listed in DYNAMIC with the reason they are total.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import pytest
from django.apps import apps
from django.db import models

from devtools.localservices import BASE_DIR

PRODUCTION = ("subtlebench", "annotator", "evaluation", "api", "demo")

# (file, the source of the order's last key) -> why the order is total.
DYNAMIC = {
    ("annotator/datamanager/tables.py", "*self.extra_order"): "every table's extra_order ends with -pk (test below)",
    (
        "evaluation/studies/participation.py",
        "_serving_order(participant)",
    ): "md5 of the seed and the pk: one value per row",
    ("evaluation/studies/participation.py", "order"): "order is _serving_order(participant), as above",
}


@dataclass(frozen=True)
class Order:
    path: str
    line: int
    keys: tuple[str, ...]
    model: type[models.Model] | None
    fixed: frozenset[str]  # fields pinned to one value by a related manager or an equality filter
    grouped: tuple[str, ...] | None  # the fields of .values(...)/.values_list(...) before an .annotate(...)
    dynamic: str | None  # the source of the last key when it is not a string

    def __str__(self) -> str:
        on = self.model.__name__ if self.model else "an unknown model"
        return f"{self.path}:{self.line}: order_by{self.keys} on {on} can tie"


def project_models() -> list[type[models.Model]]:
    return [m for m in apps.get_models() if m.__module__.split(".")[0] in (*PRODUCTION, "django")]


def unique_sets(model: type[models.Model]) -> list[frozenset[str]]:
    """The sets of field names whose values no two rows share (constraints with a condition do not count)."""
    meta = model._meta
    sets = [frozenset([f.name]) for f in meta.concrete_fields if f.unique]
    sets += [frozenset(names) for names in meta.unique_together]
    sets += [
        frozenset(c.fields)
        for c in meta.constraints
        if isinstance(c, models.UniqueConstraint) and c.fields and c.condition is None
    ]
    return sets


def field_name(model: type[models.Model], key: str) -> str | None:
    """The model's own field a key orders on ("-pk" -> "id", "video_id" -> "video"); None for a related lookup."""
    key = key.lstrip("-")
    if "__" in key:
        return None
    if key == "pk":
        return model._meta.pk.name
    for field in model._meta.concrete_fields:
        if key in (field.name, field.attname):
            return field.name
    return None


def is_total(order: Order) -> bool:
    bare = [key.lstrip("-") for key in order.keys]
    if order.grouped is not None and set(order.grouped) <= set(bare):
        return True  # one row per group: the grouped fields are unique in the result
    if order.model is None:
        # Without the model, only a key that is unique on every model with a field of that name will do.
        last = bare[-1].rsplit("__", 1)[-1]
        if last in ("pk", "id"):
            return True
        holders = [m for m in project_models() if any(f.name == last for f in m._meta.concrete_fields)]
        return bool(holders) and all(frozenset([last]) in unique_sets(m) for m in holders)
    covered = {field_name(order.model, key) for key in order.keys} | set(order.fixed)
    return any(unique <= covered for unique in unique_sets(order.model))


def related_managers() -> dict[str, list[tuple[type[models.Model], str]]]:
    """accessor name -> [(the model it returns, the field it pins)], for `video.frames`, `job.tasks`, …."""
    found: dict[str, list[tuple[type[models.Model], str]]] = {}
    for model in project_models():
        for relation in model._meta.related_objects:
            if relation.one_to_many:
                found.setdefault(relation.get_accessor_name(), []).append((relation.related_model, relation.field.name))
    return found


class OrderFinder(ast.NodeVisitor):
    def __init__(self, path: str):
        self.path = path
        self.orders: list[Order] = []
        self.by_name = {m.__name__: m for m in project_models()}
        self.managers = related_managers()

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Attribute) and node.func.attr == "order_by" and node.args):
            return
        last = node.args[-1]
        keys = tuple(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
        dynamic = None if isinstance(last, ast.Constant) else ast.unparse(last)
        model, fixed, grouped = self.chain(node.func.value)
        self.orders.append(Order(self.path, node.lineno, keys, model, frozenset(fixed), grouped, dynamic))

    def chain(self, node: ast.expr):
        """The model a queryset expression starts from, the fields it pins, and its grouping, as far as they show."""
        fixed: set[str] = set()
        grouped = None
        annotated = False
        while True:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                method = node.func.attr
                if method in ("filter", "get") and not node.args:
                    fixed.update(k.keyword.removesuffix("_id") for k in map(_Keyword, node.keywords) if k.equality)
                elif method == "annotate":
                    annotated = True
                elif method in ("values", "values_list") and annotated and grouped is None:
                    grouped = tuple(a.value for a in node.args if isinstance(a, ast.Constant))
                node = node.func.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "get_user_model":
                return self.by_name["User"], fixed, grouped
            elif isinstance(node, ast.Attribute) and node.attr == "objects" and isinstance(node.value, ast.Name):
                return self.by_name.get(node.value.id), fixed, grouped
            elif isinstance(node, ast.Attribute) and len(self.managers.get(node.attr, [])) == 1:
                [(model, pinned)] = self.managers[node.attr]
                return model, fixed | {pinned}, grouped
            else:
                return None, fixed, grouped


class _Keyword:
    def __init__(self, keyword: ast.keyword):
        self.keyword = keyword.arg or ""
        self.equality = bool(keyword.arg) and ("__" not in self.keyword or self.keyword.endswith("__exact"))
        self.keyword = self.keyword.removesuffix("__exact")


@pytest.fixture(scope="module")
def production_orders() -> list[Order]:
    """Every order_by of the production code, read once for the module (whose tests then run on one xdist
    worker), when a test first asks, not when every worker collects the module."""
    orders = []
    for package in PRODUCTION:
        for path in sorted((BASE_DIR / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            finder = OrderFinder(str(path.relative_to(BASE_DIR)))
            finder.visit(ast.parse(path.read_text(), filename=str(path)))
            orders += finder.orders
    return orders


def test_it_reads_the_orders_of_the_app(production_orders):
    # The finder sees the orders it must: a broken walk that found none would pass everything below.
    assert len(production_orders) > 80
    frames_of_a_video = [o for o in production_orders if o.model and o.model.__name__ == "Frame" and "video" in o.fixed]
    assert frames_of_a_video  # video.frames


def test_every_order_by_in_the_app_is_total(production_orders):
    ties = [str(o) for o in production_orders if o.dynamic is None and not is_total(o)]
    assert not ties, "end these orders with a unique key (-pk):\n" + "\n".join(ties)


def test_every_order_by_with_a_key_built_at_run_time_is_listed_with_its_reason(production_orders):
    built = {(o.path, o.dynamic) for o in production_orders if o.dynamic is not None}
    assert built == set(DYNAMIC)


def test_every_default_ordering_is_total():
    ties = [
        f"{m._meta.label}: Meta.ordering {m._meta.ordering} can tie"
        for m in project_models()
        if m._meta.ordering
        and not is_total(Order("", 0, tuple(m._meta.ordering), m, frozenset(), None, None))
        and m.__module__.split(".")[0] in PRODUCTION
    ]
    assert not ties, "\n".join(ties)


def test_the_data_manager_tables_end_their_orders_with_the_primary_key():
    from annotator.datamanager.tables import TABLES

    assert TABLES and all(table.extra_order[-1] == "-pk" for table in TABLES.values())


def test_the_check_finds_an_order_that_can_tie():
    # The check itself: orders on a non-unique key are caught; pk, unique fields and pinned fields pass.
    def order(source: str) -> Order:
        finder = OrderFinder("example.py")
        finder.visit(ast.parse(source))
        [found] = finder.orders
        return found

    assert not is_total(order('Job.objects.order_by("-created")'))
    assert not is_total(order('Pair.objects.filter(status="x").order_by("-submitted_at")[:50]'))
    assert not is_total(order('request.user.reviews.order_by("-created")'))
    assert not is_total(order('something.order_by("-created")'))
    assert is_total(order('Job.objects.order_by("-created", "-pk")'))
    assert is_total(order('get_user_model().objects.order_by("username")'))
    assert is_total(order('video.frames.order_by("index")'))
    assert not is_total(order('Frame.objects.order_by("index")'))
    assert is_total(order('Frame.objects.filter(video_id=1).order_by("index")'))
    assert not is_total(order('Frame.objects.filter(video__in=v).order_by("index")'))
    assert is_total(order('Pair.objects.values("category").annotate(n=Count("pk")).order_by("category")'))
    assert not is_total(order('Pair.objects.values("category", "domain").annotate(n=Count("pk")).order_by("category")'))
