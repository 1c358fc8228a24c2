"""API tokens in the admin: an administrator sees every user's tokens and revokes one; keys are never shown. And the
ticks of the periodic processes (beat, the sweeper), read-only."""

from __future__ import annotations

from django.contrib import admin
from django.utils import timezone

from subtlebench.models import ApiToken, Tick


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "created", "expires", "last_used", "revoked")
    list_filter = ("revoked", "expires")
    search_fields = ("user__username", "name", "prefix")
    readonly_fields = ("user", "digest", "prefix", "created", "last_used", "revoked")
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False  # a token is made by its owner, who alone sees its key

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        revoked = queryset.filter(revoked__isnull=True).update(revoked=timezone.now())
        self.message_user(request, f"{revoked} token(s) revoked.")


@admin.register(Tick)
class TickAdmin(admin.ModelAdmin):
    list_display = ("name", "at")
    readonly_fields = ("name", "at")

    def has_add_permission(self, request):
        return False  # written by the processes themselves
