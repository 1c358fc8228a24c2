from django.urls import path

from annotator import export_views

urlpatterns = [
    # Videos and import
    # Jobs
    # Similarity
    # Pair picking and review
    # Captions
    # Exports
    path("exports/", export_views.exports, name="exports"),
    path("exports/history/", export_views.export_history, name="export-history"),
    path("exports/<int:job_id>/download/", export_views.export_download, name="export-download"),
]
