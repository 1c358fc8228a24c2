"""List endpoints that answer pages: `?limit=&offset=`, with `count`, `next`, `previous` and `results`.

A page holds at most `MAX_PAGE_SIZE` rows: a larger `limit` is refused, not silently cut, and so is a `limit` or
`offset` that is not a whole number (DRF's own pagination would quietly fall back to the default), with a 400
naming the parameter. The schema documents both bounds.
"""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response

from subtlebench.errors import Invalid

MAX_PAGE_SIZE = 500
MAX_OFFSET = 2**31 - 1


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_PAGE_SIZE

    def get_limit(self, request):
        if self.limit_query_param not in request.query_params:
            return self.default_limit
        return self._bounded(request, self.limit_query_param, 1, self.max_limit)

    def get_offset(self, request):
        if self.offset_query_param not in request.query_params:
            return 0
        return self._bounded(request, self.offset_query_param, 0, MAX_OFFSET)

    @staticmethod
    def _bounded(request, name: str, low: int, high: int) -> int:
        raw = request.query_params[name].strip()
        if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
            raise Invalid({name: [f"Give a whole number from {low} to {high}, not {raw[:40]!r}."]})
        return int(raw)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["schema"].update({"minimum": 1, "maximum": self.max_limit, "default": self.default_limit})
                parameter["description"] = f"Rows per page, 1 to {self.max_limit} (default {self.default_limit})."
            elif parameter["name"] == self.offset_query_param:
                parameter["schema"].update({"minimum": 0, "maximum": MAX_OFFSET, "default": 0})
        return parameters


def paginated(view):
    """Mark an @api_view function as paginated so the schema documents its pages (drf-spectacular reads the
    view's pagination_class, which function views lack); the function answers with `page_response`."""
    view.cls.pagination_class = BoundedLimitOffsetPagination
    return view


def page_response(request, queryset, serialize) -> Response:
    """One page of the queryset; `serialize(rows)` gives the rows' data."""
    paginator = BoundedLimitOffsetPagination()
    page = paginator.paginate_queryset(queryset, request)
    return paginator.get_paginated_response(serialize(page))
