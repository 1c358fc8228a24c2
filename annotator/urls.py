from django.urls import path, re_path

from annotator import home, lifecycle
from annotator.captions import views as views_captions
from annotator.collections import views as views_collections
from annotator.conversations import views as views_talk
from annotator.datamanager import views as views_datamanager
from annotator.drafting import views as views_drafting
from annotator.editing import views as views_editing
from annotator.export import training_views
from annotator.export import views as views_exports
from annotator.jobs import views as views_jobs
from annotator.mining import views as views_mining
from annotator.picking import guideline_views as views_guidelines
from annotator.picking import views as views_picking
from annotator.releases import views as views_releases
from annotator.similarity import views as views_similarity
from annotator.stats import views as views_stats
from annotator.synthetic import views as views_synthetic
from annotator.videos import source_views as views_video_source
from annotator.videos import views as views_videos
from subtlebench.lifecycle import manage_view

ACTION = r"(?P<pk>[0-9]+)/(?P<action>rename|archive|unarchive|delete)/$"

urlpatterns = [
    path("", home.home, name="home"),
    path("home/dashboard/", home.home_dashboard, name="home-dashboard"),
    # Videos and import
    path("videos/", views_videos.video_list, name="video-list"),
    path("videos/upload/", views_videos.video_upload, name="video-upload"),
    path("videos/<int:video_id>/", views_videos.video_detail, name="video-detail"),
    path("videos/<int:video_id>/assign/", views_videos.video_assign_view, name="video-assign"),
    path("videos/<int:video_id>/resample/", views_videos.video_resample_view, name="video-resample"),
    re_path(r"^videos/" + ACTION, manage_view(lifecycle.VIDEOS), name="video-manage"),
    # Image collections (issue 27): import, and the queue of candidate pairs to author
    path("collections/", views_collections.collection_list, name="collection-list"),
    path("collections/import/", views_collections.collection_import_view, name="collection-import"),
    path("collections/upload/", views_collections.collection_upload_view, name="collection-upload"),
    path("collections/<int:collection_id>/", views_collections.collection_detail, name="collection-detail"),
    re_path(r"^collections/" + ACTION, manage_view(lifecycle.COLLECTIONS), name="collection-manage"),
    path("collections/licenses/", views_collections.source_license_save_view, name="source-license-save"),
    path("work/candidates/", views_collections.candidate_queue, name="candidate-queue"),
    path("work/candidates/next/", views_collections.candidate_next, name="candidate-next"),
    path("work/candidates/<int:candidate_id>/", views_collections.candidate_workbench, name="candidate-workbench"),
    path(
        "work/candidates/<int:candidate_id>/draft/",
        views_collections.candidate_draft_beacon,
        name="candidate-draft-beacon",
    ),
    path("work/candidate-skips/<int:skip_id>/undo/", views_collections.candidate_skip_undo, name="candidate-skip-undo"),
    # Edit jobs: model-edited pairs and the check of each edit
    path("edits/", views_editing.edit_jobs_page, name="edit-jobs"),
    path("edits/templates/<slug:kind>/", views_editing.edit_template_save, name="edit-template-save"),
    path("edits/jobs/<int:job_id>/", views_editing.edit_job_page, name="edit-job"),
    path("edits/check/", views_editing.edit_check_next, name="edit-check-next"),
    path("edits/<int:edit_id>/", views_editing.edit_check, name="edit-check"),
    path("edits/<int:edit_id>/accept/", views_editing.edit_accept_view, name="edit-accept"),
    path("edits/<int:edit_id>/refuse/", views_editing.edit_refuse_view, name="edit-refuse"),
    # Jobs
    path("jobs/", views_jobs.job_list, name="job-list"),
    path("jobs/<int:job_id>/", views_jobs.job_detail, name="job-detail"),
    path("jobs/<int:job_id>/cancel/", views_jobs.job_cancel_view, name="job-cancel"),
    path("jobs/<int:job_id>/retry/", views_jobs.job_retry_view, name="job-retry"),
    # Similarity
    path("mining/", views_mining.mining_page, name="mining"),
    # Pair picking and review
    path("work/", views_picking.work, name="picking-work"),
    path("work/videos/<int:video_id>/", views_picking.workbench, name="picking-workbench"),
    path("work/videos/<int:video_id>/draft/", views_picking.draft_beacon, name="picking-draft-beacon"),
    path("work/videos/<int:video_id>/source/", views_video_source.video_source, name="picking-video-source"),
    path("work/videos/<int:video_id>/frame-at/", views_video_source.video_frame_at, name="picking-frame-at"),
    path("work/videos/<int:video_id>/pick-frame/", views_video_source.video_frame_pick, name="picking-frame-pick"),
    path("work/skips/<int:skip_id>/undo/", views_picking.skip_undo, name="picking-skip-undo"),
    path("work/pairs/<int:pair_id>/withdraw/", views_picking.pair_withdraw, name="picking-pair-withdraw"),
    path("review/", views_picking.review_queue, name="picking-review-queue"),
    path("review/pairs/<int:pair_id>/", views_picking.review_pair, name="picking-review-pair"),
    path("review/pairs/<int:pair_id>/reopen/", views_picking.pair_reopen, name="picking-pair-reopen"),
    path("review/pairs/<int:pair_id>/override/", views_similarity.pair_override, name="pair-similarity-override"),
    # Conversations on pairs and captions (htmx partials)
    path("talk/unread/", views_talk.unread, name="talk-unread"),
    path("talk/pairs/<int:pair_id>/", views_talk.thread, name="talk-pair"),
    path("talk/pairs/<int:pair_id>/post/", views_talk.thread_post, name="talk-pair-post"),
    path("talk/captions/<int:caption_id>/", views_talk.thread, name="talk-caption"),
    path("talk/captions/<int:caption_id>/post/", views_talk.thread_post, name="talk-caption-post"),
    path("talk/comments/<int:comment_id>/resolve/", views_talk.comment_resolve, name="talk-resolve"),
    path("talk/workbench/videos/<int:video_id>/", views_talk.workbench_panel, name="talk-panel-video"),
    path("talk/workbench/candidates/<int:candidate_id>/", views_talk.workbench_panel, name="talk-panel-candidate"),
    path("talk/workbench/caption-tasks/<int:task_id>/", views_talk.workbench_panel, name="talk-panel-caption"),
    path("overview/", views_picking.overview, name="picking-overview"),
    # Guidelines per category and domain
    path("guidelines/", views_guidelines.guideline_list, name="guideline-list"),
    path("guidelines/panel/", views_guidelines.guideline_panel, name="guideline-panel"),
    path("guidelines/versions/<int:version_id>/", views_guidelines.guideline_version, name="guideline-version"),
    path("guidelines/<str:category>/<str:domain>/", views_guidelines.guideline_edit, name="guideline-edit"),
    path("overview/assign/", views_picking.overview_assign, name="picking-overview-assign"),
    path("review/second/", views_stats.second_review_next, name="second-review-next"),
    path("review/second/<int:double_review_id>/", views_stats.second_review, name="second-review"),
    # Team analytics
    path("stats/", views_stats.stats_page, name="stats"),
    path("stats/settings/", views_stats.stats_settings, name="stats-settings"),
    path("stats/regions/", views_stats.stats_regions, name="stats-regions"),
    path("stats/targets/", views_stats.stats_targets, name="stats-targets"),
    # Captions
    path("captions/", views_captions.captions_home, name="captions-home"),
    path("captions/batches/", views_captions.caption_batch_create, name="caption-batch-create"),
    path("captions/work/", views_captions.captions_work, name="captions-work"),
    path("captions/work/next/", views_captions.caption_lease, name="caption-lease"),
    path("captions/tasks/<int:task_id>/", views_captions.caption_workbench, name="caption-workbench"),
    path("captions/tasks/<int:task_id>/draft/", views_captions.caption_draft, name="caption-draft"),
    path("captions/tasks/<int:task_id>/submit/", views_captions.caption_submit, name="caption-submit"),
    path("captions/tasks/<int:task_id>/skip/", views_captions.caption_skip, name="caption-skip"),
    path("captions/tasks/<int:task_id>/release/", views_captions.caption_release, name="caption-release"),
    path("captions/skips/<int:skip_id>/undo/", views_captions.caption_skip_undo, name="caption-skip-undo"),
    path("captions/review/", views_captions.captions_review, name="captions-review"),
    path("captions/<int:caption_id>/review/", views_captions.caption_review, name="caption-review"),
    path("captions/<int:caption_id>/choose/", views_captions.caption_choose, name="caption-choose"),
    path("captions/<int:caption_id>/reopen/", views_captions.caption_reopen, name="caption-reopen"),
    # Data manager: tables of pairs, videos and captions, bulk actions
    path("tables/<str:table_name>/", views_datamanager.table_page, name="data-table"),
    path("tables/<str:table_name>/bulk/", views_datamanager.bulk_action, name="data-bulk"),
    path("tables/bulk/<int:job_id>/undo/", views_datamanager.bulk_undo_view, name="data-bulk-undo"),
    # Exports
    path("exports/", views_exports.exports, name="exports"),
    path("exports/history/", views_exports.export_history, name="export-history"),
    path("exports/<int:job_id>/download/", views_exports.export_download, name="export-download"),
    path("exports/<int:job_id>/zip/", views_exports.export_zip_request, name="export-zip"),
    # Releases: published, frozen benchmark versions
    path("releases/", views_releases.release_list, name="release-list"),
    path("releases/<release:release_name>/training/", training_views.training_new, name="release-training-new"),
    path(
        "releases/<release:release_name>/training/<int:set_id>.zip",
        training_views.training_zip,
        name="release-training-zip",
    ),
    # Synthetic sweeps: the paper's controlled experiments, and their heatmaps
    path("synthetic/", views_synthetic.sweep_list, name="sweep-list"),
    path("synthetic/<int:sweep_id>/publish/", views_synthetic.sweep_publish_view, name="sweep-publish"),
    re_path(r"^synthetic/" + ACTION, manage_view(lifecycle.SWEEPS), name="sweep-manage"),
    re_path(r"^models/endpoints/" + ACTION, manage_view(lifecycle.ENDPOINTS), name="endpoint-manage"),
    path("models/drafting/", views_drafting.drafting_settings, name="drafting-settings"),
]
