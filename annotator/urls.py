from django.urls import path

from annotator import views_videos

urlpatterns = [
    # Videos and import
    path("videos/", views_videos.video_list, name="video-list"),
    path("videos/upload/", views_videos.video_upload, name="video-upload"),
    path("videos/<int:video_id>/", views_videos.video_detail, name="video-detail"),
    # Jobs
    # Similarity
    # Pair picking and review
    # Captions
    # Exports
]
