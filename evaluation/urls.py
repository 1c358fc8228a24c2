"""The measuring side's pages: model runs under /models/, studies under /studies/, participant pages under
/p/<token>/, and the results that set them side by side (a release's page and report, compare, the judge check, a
sweep's heatmap)."""

from __future__ import annotations

from django.urls import path, re_path

import annotator.releases.converters  # noqa: F401 (registers <release:...>)
from evaluation.results import correlation, dashboard, judge_check, release_report, sweeps
from evaluation.results import views as results
from evaluation.runs import views as runs
from evaluation.studies import participant_views as p
from evaluation.studies import views
from evaluation.studies.lifecycle import STUDIES
from subtlebench.lifecycle import manage_view

urlpatterns = [
    # The coordinator's home page: its measuring part (annotator/home.py loads it)
    path("home/measure/", dashboard.home_measure, name="home-measure"),
    # Model runs
    path("models/", runs.model_list, name="model-list"),
    path("models/endpoints/new/", runs.model_endpoint_new, name="model-endpoint-new"),
    path("models/endpoints/<int:endpoint_id>/profile/", runs.model_endpoint_profile, name="model-endpoint-profile"),
    path("models/runs/new/", runs.model_run_new, name="model-run-new"),
    path("models/runs/<int:run_id>/", runs.model_run_detail, name="model-run-detail"),
    path("models/runs/<int:run_id>/results/", runs.model_run_results, name="model-run-results"),
    path("models/runs/<int:run_id>/label/", runs.model_run_label, name="model-run-label"),
    path("models/import/", runs.model_import, name="model-import"),
    path("models/benchmarks/", correlation.benchmark_list, name="other-benchmarks"),
    path("models/benchmarks/<int:benchmark_id>/", correlation.benchmark_detail, name="other-benchmark"),
    # Studies
    path("studies/", views.study_list, name="study-list"),
    path("studies/create/", views.study_create, name="study-create"),
    path("studies/plan/", views.study_plan, name="study-plan"),
    path("studies/<int:pk>/", results.study_detail, name="study-detail"),
    re_path(
        r"^studies/(?P<pk>[0-9]+)/(?P<action>rename|archive|unarchive|delete)/$",
        manage_view(STUDIES),
        name="study-manage",
    ),
    path("studies/<int:pk>/invites/", views.invite_list, name="study-invites"),
    path("studies/<int:pk>/invites/create/", views.invite_create, name="study-invite-create"),
    path("studies/<int:pk>/invites.csv", views.invite_csv, name="study-invites-csv"),
    path("studies/<int:pk>/attention/", views.attention_add, name="study-attention"),
    path("studies/<int:pk>/abandoned/release/", views.release_abandoned, name="study-release-abandoned"),
    path("studies/<int:pk>/responses.csv", views.responses_csv, name="study-responses-csv"),
    path("studies/<int:pk>/summary.json", results.summary_json, name="study-summary-json"),
    # Results: a release with what measured it, its report, runs and humans compared, the judge check, sweeps
    path("releases/<release:release_name>/", results.release_detail, name="release-detail"),
    path("releases/<release:release_name>/published/", results.release_mark_public, name="release-mark-public"),
    path("models/compare/", results.model_compare, name="model-compare"),
    path("studies/models/", results.model_compare, name="models-beside-humans"),  # the compare page, its humans part
    path("studies/models/misses/", results.model_misses, name="model-misses"),
    path("releases/<release:release_name>/report/", release_report.release_report_page, name="release-report"),
    path(
        "releases/<release:release_name>/report/<str:split>/",
        release_report.release_report_page,
        name="release-report-split",
    ),
    path(
        "releases/<release:release_name>/report/<str:split>/correlation/",
        correlation.correlation_section,
        name="release-report-correlation",
    ),
    path(
        "releases/<release:release_name>/report/<str:split>/correlation.csv",
        correlation.correlation_csv,
        name="release-report-correlation-csv",
    ),
    path(
        "releases/<release:release_name>/report/<str:split>/<str:file_name>",
        release_report.release_report_download,
        name="release-report-file",
    ),
    path("models/runs/<int:run_id>/judge-check/", judge_check.judge_check_page, name="judge-check"),
    path("synthetic/<int:sweep_id>/", sweeps.sweep_detail, name="sweep-detail"),
    path("synthetic/<int:sweep_id>/heatmap.svg", sweeps.sweep_heatmap_svg, name="sweep-heatmap-svg"),
    path("synthetic/<int:sweep_id>/heatmap.png", sweeps.sweep_heatmap_png, name="sweep-heatmap-png"),
    path("synthetic/<int:sweep_id>/results.csv", sweeps.sweep_results_csv, name="sweep-results-csv"),
    # Participants
    path("p/open/<str:open_token>/", p.open_link, name="participant-open"),
    path("p/open/<str:open_token>/consent/", p.open_consent, name="participant-open-consent"),
    path("p/open/<str:open_token>/screen-out/", p.open_screen_out, name="participant-open-screen-out"),
    path("p/<str:token>/", p.start, name="participant-start"),
    path("p/<str:token>/consent/", p.consent, name="participant-consent"),
    path("p/<str:token>/practice/", p.practice, name="participant-practice"),
    path("p/<str:token>/practice/<str:item_token>/", p.practice_answer, name="participant-practice-answer"),
    path("p/<str:token>/items/", p.item, name="participant-item"),
    path("p/<str:token>/items/<str:item_token>/", p.answer, name="participant-answer"),
    path("p/<str:token>/done/", p.done, name="participant-done"),
    path("p/<str:token>/screen-out/", p.screen_out, name="participant-screen-out"),
    path("p/<str:token>/return/", p.return_study, name="participant-return"),
    path("p/<str:token>/image/<str:signed>/", p.image, name="participant-image"),
]
