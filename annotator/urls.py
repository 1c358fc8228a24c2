from django.urls import path

from annotator import views_jobs, views_videos

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
    # Captions
    # Exports
]
