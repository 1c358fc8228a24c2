from django.urls import path

from annotator import views_jobs

urlpatterns = [
    # Videos and import
    # Jobs
    path("jobs/", views_jobs.job_list, name="job-list"),
    path("jobs/<int:job_id>/", views_jobs.job_detail, name="job-detail"),
    # Similarity
    # Pair picking and review
    # Captions
    # Exports
]
