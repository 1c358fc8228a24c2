"""Server paths (import sources, model folders, errors that name files) are for coordinators only: a serializer
mixin that shortens every path in those fields to its last part for everyone else, and fails closed when the view
passed no request."""

from __future__ import annotations

from subtlebench.roles import COORDINATOR, has_role
from subtlebench.security import without_server_paths


class CoordinatorOnlyPaths:
    """`coordinator_paths = ("source",)`: paths in those fields keep only their last part, unless the request's user
    is a coordinator."""

    coordinator_paths: tuple[str, ...] = ()

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not has_role(request.user, COORDINATOR):
            for name in self.coordinator_paths:
                if isinstance(data.get(name), str):
                    data[name] = without_server_paths(data[name])
        return data
