from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from api import similarity, views

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("token/", views.token_obtain, name="api-token"),
    # Similarity
    path("similarity/", similarity.images_similarity, name="api-images-similarity"),
    path("videos/<int:video_id>/embeddings/", similarity.video_embeddings, name="api-video-embeddings"),
    path("videos/<int:video_id>/suggestions/", similarity.video_suggestions, name="api-video-suggestions"),
]
