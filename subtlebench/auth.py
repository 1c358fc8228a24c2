"""The login backend: Django's ModelBackend, whose user of each request comes with its roles in the same query."""

from __future__ import annotations

import functools

from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied

from subtlebench.roles import ROLES, with_roles


@functools.cache  # the same text for every request: written once per process
def user_with_roles_sql() -> str:
    """The user and the names of its role groups, one row. Written out, not built by the ORM: every request of a
    logged-in user runs it, and building the grouped ORM query took three times the CPU of running this one."""
    users, groups, members = User._meta.db_table, Group._meta.db_table, User.groups.through._meta.db_table
    return (
        f'SELECT "{users}".*, ARRAY('
        f'SELECT "{groups}"."name" FROM "{members}" JOIN "{groups}" ON "{groups}"."id" = "{members}"."group_id" '
        f'WHERE "{members}"."user_id" = "{users}"."id" AND "{groups}"."name" = ANY(%s)'
        f') AS "role_names" FROM "{users}" WHERE "{users}"."id" = %s'
    )


class RolesBackend(ModelBackend):
    """Every request of a logged-in user loads the user (`get_user`) and nearly every view then checks a role
    (subtlebench.roles): here both are one query instead of two.

    Django's ModelBackend stays listed after this one (settings.AUTHENTICATION_BACKENDS) only so that the sessions
    it logged in before this backend existed stay logged in (a session names the backend that logged it in). It
    never checks a password: a wrong one ends the login here (PermissionDenied stops Django's loop over the
    backends), so a failed login costs one password hash and one failure, as before."""

    def get_user(self, user_id):
        user = next(iter(User.objects.raw(user_with_roles_sql(), [list(ROLES), user_id])), None)
        if user is None or not self.user_can_authenticate(user):
            return None
        return with_roles(user, user.role_names)

    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            raise PermissionDenied
        return user
