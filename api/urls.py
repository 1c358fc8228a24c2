from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from api import captions, views

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("token/", views.token_obtain, name="api-token"),
    # Captions
    path("captions/batches/", captions.caption_batch_list, name="api-caption-batch-list"),
    path("captions/batches/create/", captions.caption_batch_create, name="api-caption-batch-create"),
    path("captions/tasks/lease/", captions.caption_task_lease, name="api-caption-task-lease"),
    path("captions/tasks/<int:task_id>/draft/", captions.caption_draft_save, name="api-caption-draft"),
    path("captions/tasks/<int:task_id>/submit/", captions.caption_submit, name="api-caption-submit"),
    path("captions/tasks/<int:task_id>/skip/", captions.caption_skip, name="api-caption-skip"),
    path("captions/review/", captions.caption_review_queue, name="api-caption-review-queue"),
    path("captions/<int:caption_id>/review/", captions.caption_review, name="api-caption-review"),
    path("captions/<int:caption_id>/choose/", captions.caption_choose, name="api-caption-choose"),
]
