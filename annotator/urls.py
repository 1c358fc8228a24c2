from django.urls import path

from annotator import views_captions

urlpatterns = [
    # Videos and import
    # Jobs
    # Similarity
    # Pair picking and review
    # Captions
    path("captions/", views_captions.captions_home, name="captions-home"),
    path("captions/batches/", views_captions.caption_batch_create, name="caption-batch-create"),
    path("captions/work/", views_captions.captions_work, name="captions-work"),
    path("captions/work/next/", views_captions.caption_lease, name="caption-lease"),
    path("captions/tasks/<int:task_id>/", views_captions.caption_workbench, name="caption-workbench"),
    path("captions/tasks/<int:task_id>/draft/", views_captions.caption_draft, name="caption-draft"),
    path("captions/tasks/<int:task_id>/submit/", views_captions.caption_submit, name="caption-submit"),
    path("captions/tasks/<int:task_id>/skip/", views_captions.caption_skip, name="caption-skip"),
    path("captions/review/", views_captions.captions_review, name="captions-review"),
    path("captions/<int:caption_id>/review/", views_captions.caption_review, name="caption-review"),
    path("captions/<int:caption_id>/choose/", views_captions.caption_choose, name="caption-choose"),
    # Exports
]
