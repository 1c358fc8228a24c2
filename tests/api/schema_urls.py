"""A smaller API for the schema test (tests/api/test_api_contract.py): the schema view and one endpoint."""

from django.urls import path

from api import views
from api.schema import SchemaView

urlpatterns = [
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    path("api/token/", views.token_obtain, name="api-token"),
]
