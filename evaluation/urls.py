"""Coordinator pages under /studies/, participant pages under /p/<token>/."""

from __future__ import annotations

from django.urls import path

from evaluation import judge_check, release_report, views
from evaluation import participant_views as p

urlpatterns = [
    path("studies/", views.study_list, name="study-list"),
    path("studies/create/", views.study_create, name="study-create"),
    path("studies/plan/", views.study_plan, name="study-plan"),
    path("studies/<int:pk>/", views.study_detail, name="study-detail"),
    path("studies/<int:pk>/invites/", views.invite_list, name="study-invites"),
    path("studies/<int:pk>/invites/create/", views.invite_create, name="study-invite-create"),
    path("studies/<int:pk>/invites.csv", views.invite_csv, name="study-invites-csv"),
    path("studies/<int:pk>/attention/", views.attention_add, name="study-attention"),
    path("studies/<int:pk>/abandoned/release/", views.release_abandoned, name="study-release-abandoned"),
    path("studies/<int:pk>/responses.csv", views.responses_csv, name="study-responses-csv"),
    path("studies/<int:pk>/summary.json", views.summary_json, name="study-summary-json"),
    # The models beside the humans read the studies: evaluation's pages (the models' own pages are /models/).
    path("studies/models/", views.models_beside_humans, name="models-beside-humans"),
    path("studies/models/misses/", views.model_misses, name="model-misses"),
    # The release report: humans and every model on a release's split (the release's own pages: annotator/urls.py).
    path("releases/v<int:number>/report/", release_report.release_report_page, name="release-report"),
    path("releases/v<int:number>/report/<str:split>/", release_report.release_report_page, name="release-report-split"),
    path(
        "releases/v<int:number>/report/<str:split>/<str:file_name>",
        release_report.release_report_download,
        name="release-report-file",
    ),
    # The description task's judge checked by people (issue 28).
    path("models/runs/<int:run_id>/judge-check/", judge_check.judge_check_page, name="judge-check"),
    path("p/open/<str:open_token>/", p.open_link, name="participant-open"),
    path("p/open/<str:open_token>/consent/", p.open_consent, name="participant-open-consent"),
    path("p/<str:token>/", p.start, name="participant-start"),
    path("p/<str:token>/consent/", p.consent, name="participant-consent"),
    path("p/<str:token>/practice/", p.practice, name="participant-practice"),
    path("p/<str:token>/practice/<str:item_token>/", p.practice_answer, name="participant-practice-answer"),
    path("p/<str:token>/items/", p.item, name="participant-item"),
    path("p/<str:token>/items/<str:item_token>/", p.answer, name="participant-answer"),
    path("p/<str:token>/done/", p.done, name="participant-done"),
    path("p/<str:token>/image/<str:signed>/", p.image, name="participant-image"),
]
