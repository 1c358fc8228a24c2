"""The login backend: Django's ModelBackend, whose user of each request comes with its roles in the same query."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied

from subtlebench.roles import role_names, with_roles


class RolesBackend(ModelBackend):
    """Every request of a logged-in user loads the user (`get_user`) and nearly every view then checks a role
    (subtlebench.roles): here both are one query instead of two.

    Django's ModelBackend stays listed after this one (settings.AUTHENTICATION_BACKENDS) only so that the sessions
    it logged in before this backend existed stay logged in (a session names the backend that logged it in). It
    never checks a password: a wrong one ends the login here (PermissionDenied stops Django's loop over the
    backends), so a failed login costs one password hash and one failure, as before."""

    def get_user(self, user_id):
        user = get_user_model()._default_manager.annotate(role_names=role_names()).filter(pk=user_id).first()
        if user is None or not self.user_can_authenticate(user):
            return None
        return with_roles(user, user.role_names)

    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            raise PermissionDenied
        return user
