from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from api import picking, views

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("token/", views.token_obtain, name="api-token"),
    # Pair picking and review
    path("work/lease/", picking.lease_next, name="api-lease-next"),
    path("videos/<int:video_id>/heartbeat/", picking.lease_heartbeat, name="api-lease-heartbeat"),
    path("videos/<int:video_id>/release/", picking.lease_release, name="api-lease-release"),
    path("videos/<int:video_id>/assign/", picking.video_assign, name="api-video-assign"),
    path("videos/<int:video_id>/draft/", picking.draft, name="api-pair-draft"),
    path("pairs/submit/", picking.pair_submit, name="api-pair-submit"),
    path("pairs/<int:pair_id>/review/", picking.pair_review, name="api-pair-review"),
]
