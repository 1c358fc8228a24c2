from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from api import exports, views

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("token/", views.token_obtain, name="api-token"),
    # Exports
    path("exports/", exports.export_list_api, name="api-export-list"),
    path("exports/start/", exports.export_start_api, name="api-export-start"),
    path("exports/<int:job_id>/", exports.export_detail_api, name="api-export-detail"),
]
