from csp.decorators import csp_update
from django.contrib.auth.decorators import login_required
from django.urls import path, re_path
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerSplitView

import annotator.releases.converters  # noqa: F401 (registers <release:...>)
from api import (
    captions,
    collections,
    conversations,
    datamanager,
    drafting,
    editing,
    evaluation,
    exports,
    jobs,
    lifecycle,
    models_eval,
    picking,
    similarity,
    stats,
    videos,
    views,
)
from api.schema import SchemaView

# Swagger UI and Redoc put a <style> element in their page: inline styles there only, scripts still from files.
docs_page = csp_update({"style-src": ["'unsafe-inline'"]})

urlpatterns = [
    # The schema needs a session or a token (SPECTACULAR_SETTINGS SERVE_PERMISSIONS); the browsable docs send
    # a logged-out browser to the login page. Swagger's split view serves its script as a file: no inline script.
    path("schema/", SchemaView.as_view(), name="api-schema"),
    path(
        "docs/", login_required(docs_page(SpectacularSwaggerSplitView.as_view(url_name="api-schema"))), name="api-docs"
    ),
    path("redoc/", login_required(docs_page(SpectacularRedocView.as_view(url_name="api-schema"))), name="api-redoc"),
    path("token/", views.token_obtain, name="api-token"),
    path("tokens/", views.token_list, name="api-token-list"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="api-token-revoke"),
    # Jobs
    path("jobs/", jobs.job_list, name="api-job-list"),
    path("jobs/<int:job_id>/", jobs.job_detail, name="api-job-detail"),
    path("jobs/<int:job_id>/cancel/", jobs.job_cancel_api, name="api-job-cancel"),
    path("jobs/<int:job_id>/retry/", jobs.job_retry_api, name="api-job-retry"),
    # Videos and frames
    # Similarity
    # Picking and review
    # Captions
    # Exports
    # Human-baseline studies (evaluation)
    path("studies/", evaluation.study_list, name="api-study-list"),
    path("studies/create/", evaluation.study_create, name="api-study-create"),
    path("studies/<int:pk>/invites/", evaluation.invite_list, name="api-study-invites"),
    path("studies/<int:pk>/invites/create/", evaluation.invite_create, name="api-study-invite-create"),
    path("studies/<int:pk>/progress/", evaluation.study_progress, name="api-study-progress"),
    path("studies/<int:pk>/results/", evaluation.study_results, name="api-study-results"),
    path("p/<str:token>/item/", evaluation.participant_item, name="api-participant-item"),
    path("p/<str:token>/item/<str:item_token>/answer/", evaluation.participant_answer, name="api-participant-answer"),
    path("videos/", videos.video_list, name="api-video-list"),
    path("videos/import/", videos.video_import, name="api-video-import"),
    path("videos/<int:video_id>/", videos.video_detail, name="api-video-detail"),
    path("videos/<int:video_id>/frames/", videos.video_frames, name="api-video-frames"),
    # Pair picking and review
    path("work/lease/", picking.lease_next, name="api-lease-next"),
    path("videos/<int:video_id>/heartbeat/", picking.lease_heartbeat, name="api-lease-heartbeat"),
    path("videos/<int:video_id>/release/", picking.lease_release, name="api-lease-release"),
    path("videos/<int:video_id>/assign/", picking.video_assign, name="api-video-assign"),
    path("videos/<int:video_id>/draft/", picking.draft, name="api-pair-draft"),
    path("videos/<int:video_id>/model-draft/", drafting.model_draft, name="api-model-draft"),
    path("videos/<int:video_id>/model-draft/answers/", drafting.draft_answers, name="api-draft-answers"),
    path("pairs/submit/", picking.pair_submit, name="api-pair-submit"),
    path("pairs/<int:pair_id>/review/", picking.pair_review, name="api-pair-review"),
    path("second-reviews/next/", stats.second_review_next, name="api-second-review-next"),
    path("second-reviews/<int:double_review_id>/", stats.second_review_submit, name="api-second-review"),
    path("pairs/<int:pair_id>/reopen/", picking.pair_reopen, name="api-pair-reopen"),
    path("pairs/<int:pair_id>/withdraw/", picking.pair_withdraw, name="api-pair-withdraw"),
    # Conversations on pairs and captions
    path("pairs/<int:pair_id>/comments/", conversations.pair_comments, name="api-pair-comments"),
    path("pairs/<int:pair_id>/fixed/", conversations.pair_fixed, name="api-pair-fixed"),
    path("captions/<int:caption_id>/comments/", conversations.caption_comments, name="api-caption-comments"),
    path("captions/<int:caption_id>/fixed/", conversations.caption_fixed, name="api-caption-fixed"),
    path("comments/<int:comment_id>/resolve/", conversations.comment_resolve, name="api-comment-resolve"),
    path("skips/", picking.video_skip_list, name="api-video-skip-list"),
    path("skips/<int:skip_id>/undo/", picking.video_skip_undo, name="api-video-skip-undo"),
    path("captions/batches/", captions.caption_batch_list, name="api-caption-batch-list"),
    path("captions/batches/create/", captions.caption_batch_create, name="api-caption-batch-create"),
    path("captions/tasks/lease/", captions.caption_task_lease, name="api-caption-task-lease"),
    path("captions/tasks/<int:task_id>/draft/", captions.caption_draft_save, name="api-caption-draft"),
    path("captions/tasks/<int:task_id>/submit/", captions.caption_submit, name="api-caption-submit"),
    path("captions/tasks/<int:task_id>/skip/", captions.caption_skip, name="api-caption-skip"),
    path("captions/tasks/<int:task_id>/release/", captions.caption_release, name="api-caption-release"),
    path("captions/review/", captions.caption_review_queue, name="api-caption-review-queue"),
    path("captions/<int:caption_id>/review/", captions.caption_review, name="api-caption-review"),
    path("captions/<int:caption_id>/choose/", captions.caption_choose, name="api-caption-choose"),
    path("captions/<int:caption_id>/reopen/", captions.caption_reopen, name="api-caption-reopen"),
    path("captions/skips/", captions.caption_skip_list, name="api-caption-skip-list"),
    path("captions/skips/<int:skip_id>/undo/", captions.caption_skip_undo, name="api-caption-skip-undo"),
    path("similarity/", similarity.images_similarity, name="api-images-similarity"),
    path("videos/<int:video_id>/embeddings/", similarity.video_embeddings, name="api-video-embeddings"),
    path("videos/<int:video_id>/suggestions/", similarity.video_suggestions, name="api-video-suggestions"),
    path("pairs/<int:pair_id>/similarity-override/", similarity.pair_similarity_override, name="api-pair-override"),
    path("pairs/bulk/", datamanager.pairs_bulk, name="api-pairs-bulk"),
    path("videos/bulk/", datamanager.videos_bulk, name="api-videos-bulk"),
    path("pairs/bulk/preview/", datamanager.pairs_bulk_preview, name="api-pairs-bulk-preview"),
    path("videos/bulk/preview/", datamanager.videos_bulk_preview, name="api-videos-bulk-preview"),
    path("bulk/<int:job_id>/undo/", datamanager.bulk_undo_view, name="api-bulk-undo"),
    path("exports/", exports.export_list_api, name="api-export-list"),
    path("exports/start/", exports.export_start_api, name="api-export-start"),
    path("exports/<int:job_id>/", exports.export_detail_api, name="api-export-detail"),
    path(
        "releases/<release:release_name>/publications/",
        exports.release_publication_list_api,
        name="api-release-publications",
    ),
    path(
        "releases/<release:release_name>/publications/mark/",
        exports.release_publication_create_api,
        name="api-release-publication-mark",
    ),
    path("models/", models_eval.endpoint_list, name="api-model-list"),
    path("models/create/", models_eval.endpoint_create_api, name="api-model-create"),
    path("models/<int:endpoint_id>/profile/", models_eval.endpoint_profile_api, name="api-model-profile"),
    path("models/runs/create/", models_eval.run_create, name="api-model-run-create"),
    path("models/runs/<int:run_id>/", models_eval.run_detail, name="api-model-run-detail"),
    path("models/runs/<int:run_id>/results/", models_eval.run_results, name="api-model-run-results"),
    path("models/runs/<int:run_id>/label/", models_eval.run_label, name="api-model-run-label"),
    # Image collections and the pair-authoring queue (issue 27)
    path("collections/", collections.collection_list, name="api-collection-list"),
    path("collections/import/", collections.collection_import_api, name="api-collection-import"),
    # Edit jobs: model-edited pairs, and the check of each edit
    path("edit-jobs/", editing.edit_job_start_api, name="api-edit-job-start"),
    path("edit-jobs/<int:job_id>/edits/", editing.edit_job_edits, name="api-edit-job-edits"),
    path("edits/<int:edit_id>/accept/", editing.edit_accept_api, name="api-edit-accept"),
    path("edits/<int:edit_id>/refuse/", editing.edit_refuse_api, name="api-edit-refuse"),
    path("candidates/lease/", collections.candidate_lease_next, name="api-candidate-lease"),
    path("candidates/<int:candidate_id>/heartbeat/", collections.candidate_heartbeat, name="api-candidate-heartbeat"),
    path("candidates/<int:candidate_id>/release/", collections.candidate_release, name="api-candidate-release"),
    path("candidates/<int:candidate_id>/draft/", collections.candidate_draft, name="api-candidate-draft"),
    path("candidates/<int:candidate_id>/submit/", collections.candidate_submit, name="api-candidate-submit"),
    path(
        "candidates/<int:candidate_id>/model-draft/", drafting.candidate_model_draft, name="api-candidate-model-draft"
    ),
    path(
        "candidates/<int:candidate_id>/model-draft/answers/",
        drafting.candidate_draft_answers,
        name="api-candidate-draft-answers",
    ),
    path("candidate-skips/<int:skip_id>/undo/", collections.candidate_skip_undo, name="api-candidate-skip-undo"),
    path("", views.api_index, name="api-index"),
    # Rename, archive, take out of the archive, delete (coordinators)
    *[
        path(f"{prefix}/<int:{key}>/{action}/", view, name=f"api-{name}-{action}")
        for prefix, key, name, views in (
            ("videos", "video_id", "video", lifecycle.VIDEO_VIEWS),
            ("collections", "collection_id", "collection", lifecycle.COLLECTION_VIEWS),
            ("models", "endpoint_id", "model", lifecycle.ENDPOINT_VIEWS),
            ("studies", "pk", "study", lifecycle.STUDY_VIEWS),
        )
        for action, view in views.items()
    ],
    # Last: any other /api/ URL answers the JSON 404, not the HTML page.
    re_path(r"^(?P<path>.*)$", views.not_found, name="api-not-found"),
]
