"""Server paths (import sources, model folders, errors that name files) are for coordinators only: a serializer
mixin that blanks those fields for everyone else, and fails closed when the view passed no request."""

from __future__ import annotations

from subtlebench.roles import COORDINATOR, has_role


class CoordinatorOnlyFields:
    """`coordinator_only = ("source",)`: those fields are "" unless the request's user is a coordinator."""

    coordinator_only: tuple[str, ...] = ()

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not has_role(request.user, COORDINATOR):
            for name in self.coordinator_only:
                if name in data:
                    data[name] = ""
        return data
