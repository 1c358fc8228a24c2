from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from api import videos, views

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("token/", views.token_obtain, name="api-token"),
    # Videos and frames
    path("videos/", videos.video_list, name="api-video-list"),
    path("videos/import/", videos.video_import, name="api-video-import"),
    path("videos/<int:video_id>/", videos.video_detail, name="api-video-detail"),
    path("videos/<int:video_id>/frames/", videos.video_frames, name="api-video-frames"),
]
