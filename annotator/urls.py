from django.urls import path

from annotator import views_jobs, views_picking, views_videos

urlpatterns = [
    # Videos and import
    path("videos/", views_videos.video_list, name="video-list"),
    path("videos/upload/", views_videos.video_upload, name="video-upload"),
    path("videos/<int:video_id>/", views_videos.video_detail, name="video-detail"),
    # Jobs
    path("jobs/", views_jobs.job_list, name="job-list"),
    path("jobs/<int:job_id>/", views_jobs.job_detail, name="job-detail"),
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
