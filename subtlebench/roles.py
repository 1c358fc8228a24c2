"""The three roles (Django groups) and the checks every view and API endpoint makes with them."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Q, Value
from rest_framework.permissions import BasePermission

from subtlebench.errors import Forbidden

ANNOTATOR = "annotator"
REVIEWER = "reviewer"
COORDINATOR = "coordinator"
ROLES = (ANNOTATOR, REVIEWER, COORDINATOR)


def roles_of(user) -> set[str]:
    if not user.is_authenticated:
        return set()
    if not hasattr(user, "_roles"):
        with_roles(user, user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    return user._roles


def role_names(groups: str = "groups") -> ArrayAgg:
    """An annotation: the names of a user's role groups, `groups` the path to them (`user__groups` from a row that
    points at the user). Read with the user, then given to `with_roles`."""
    return ArrayAgg(groups + "__name", filter=Q(**{f"{groups}__name__in": ROLES}), default=Value([]))


def with_roles(user, names):
    """The user, its roles set from the names of its role groups (a superuser holds every role)."""
    user._roles = set(ROLES) if user.is_superuser else set(names)
    return user


def has_role(user, *roles: str) -> bool:
    """True when the user holds any of the roles. Coordinators may do what reviewers do."""
    held = roles_of(user)
    if COORDINATOR in held and REVIEWER in roles:
        return True
    return bool(held.intersection(roles))


def role_required(*roles: str):
    """View decorator: logged in (else redirect to login) and holding one of the roles (else 403)."""

    def decorator(view):
        @wraps(view)
        @login_required
        def wrapped(request, *args, **kwargs):
            if not has_role(request.user, *roles):
                raise Forbidden(f"This page needs the role: {' or '.join(roles)}.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


class HasRole(BasePermission):
    """DRF permission: `permission_classes = [HasRole.of(COORDINATOR)]`."""

    roles: tuple[str, ...] = ()

    @classmethod
    def of(cls, *roles: str):
        return type(f"HasRole_{'_'.join(roles)}", (cls,), {"roles": roles})

    def has_permission(self, request, view):
        return request.user.is_authenticated and has_role(request.user, *self.roles)
