"""List endpoints that answer pages: `?limit=&offset=`, with `count`, `next`, `previous` and `results`."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response


def paginated(view):
    """Mark an @api_view function as paginated so the schema documents its pages (drf-spectacular reads the
    view's pagination_class, which function views lack); the function answers with `page_response`."""
    view.cls.pagination_class = LimitOffsetPagination
    return view


def page_response(request, queryset, serialize) -> Response:
    """One page of the queryset; `serialize(rows)` gives the rows' data."""
    paginator = LimitOffsetPagination()
    page = paginator.paginate_queryset(queryset, request)
    return paginator.get_paginated_response(serialize(page))
