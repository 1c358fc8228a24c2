from django.urls import path

from annotator import views_picking

urlpatterns = [
    # Videos and import
    # Jobs
    # Similarity
    # Pair picking and review
    path("work/", views_picking.work, name="picking-work"),
    path("work/videos/<int:video_id>/", views_picking.workbench, name="picking-workbench"),
    path("review/", views_picking.review_queue, name="picking-review-queue"),
    path("review/pairs/<int:pair_id>/", views_picking.review_pair, name="picking-review-pair"),
    path("overview/", views_picking.overview, name="picking-overview"),
    path("overview/assign/", views_picking.overview_assign, name="picking-overview-assign"),
    # Captions
    # Exports
]
