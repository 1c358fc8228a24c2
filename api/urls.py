from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from api import jobs, views

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("token/", views.token_obtain, name="api-token"),
    # Jobs
    path("jobs/", jobs.job_list, name="api-job-list"),
    path("jobs/<int:job_id>/", jobs.job_detail, name="api-job-detail"),
    # Videos and frames
    # Similarity
    # Picking and review
    # Captions
    # Exports
    # Studies
]
