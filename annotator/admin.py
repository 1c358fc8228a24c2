from django import forms
from django.contrib import admin, messages

from annotator.llm.endpoints import check_base_url
from annotator.llm.keys import key_problem
from annotator.models import (
    BulkAction,
    BulkChange,
    CandidateSkip,
    Caption,
    CaptionBatch,
    CaptionReview,
    CaptionSkip,
    CaptionTask,
    Collection,
    Comment,
    CommentNotice,
    DoubleReview,
    EditTemplate,
    EmbeddingModel,
    Frame,
    Guideline,
    GuidelineExample,
    GuidelineVersion,
    Image,
    ImageEdit,
    ImageEmbedding,
    Job,
    JobItem,
    JobTask,
    MinedBlock,
    ModelDraft,
    ModelEndpoint,
    Pair,
    PairCandidate,
    PairDraft,
    Release,
    ReleaseDiff,
    ReleaseItem,
    ReleasePublication,
    ReleaseReservation,
    Review,
    SourceLicense,
    Sweep,
    SweepItem,
    Target,
    TeamSettings,
    TrainingItem,
    TrainingSet,
    Video,
    VideoHandover,
    VideoSkip,
)
from subtlebench.errors import Invalid


@admin.register(Video)
class VideoAdmin(admin.ModelAdmin):
    list_display = ("yt8m_id", "title", "status", "domain", "duration", "frame_count", "created")
    list_filter = ("status", "domain")
    search_fields = ("yt8m_id", "title", "labels")


@admin.register(Image)
class ImageAdmin(admin.ModelAdmin):
    list_display = ("id", "source", "original_name", "width", "height", "created")
    list_filter = ("source",)
    search_fields = ("original_name", "sha256")


@admin.register(Frame)
class FrameAdmin(admin.ModelAdmin):
    list_display = ("video", "index", "timestamp")
    list_select_related = ("video",)
    raw_id_fields = ("video", "image")
    search_fields = ("video__yt8m_id",)


@admin.register(Pair)
class PairAdmin(admin.ModelAdmin):
    list_display = ("id", "category", "domain", "source", "source_id", "status", "similarity", "author", "created")
    list_filter = ("status", "category", "domain", "source")
    search_fields = ("source_id", "question", "answer")
    raw_id_fields = ("image_1", "image_2", "video", "author")


@admin.register(Review)
class ReviewAdmin(admin.ModelAdmin):
    list_display = ("pair", "reviewer", "decision", "created")
    list_filter = ("decision",)
    raw_id_fields = ("pair",)


@admin.register(Caption)
class CaptionAdmin(admin.ModelAdmin):
    list_display = ("pair", "author", "status", "created")
    list_filter = ("status",)
    raw_id_fields = ("pair",)


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("title", "kind", "status", "done", "total", "created", "finished")
    list_filter = ("kind", "status")


@admin.register(JobTask)
class JobTaskAdmin(admin.ModelAdmin):
    """The units of jobs (the outbox): where a stuck job's work is, which worker had it, why it was requeued."""

    list_display = ("pk", "job", "name", "status", "attempts", "sends", "worker", "heartbeat")
    list_filter = ("status", "name")
    raw_id_fields = ("job",)


@admin.register(JobItem)
class JobItemAdmin(admin.ModelAdmin):
    """What a bulk job did to each item (annotator/datamanager/bulk.py): the refused ones say why."""

    list_display = ("job", "item_id", "ok", "message", "created")
    list_filter = ("ok",)
    raw_id_fields = ("job",)


@admin.register(EmbeddingModel)
class EmbeddingModelAdmin(admin.ModelAdmin):
    """Read-only: a model becomes current only through `check_dinov3 --activate`, which loads and checks the
    weights where the worker runs them (the web process never opens them)."""

    list_display = ("fingerprint", "active", "demo", "dim", "dtype", "image_size", "activated_at", "activated_by")
    list_filter = ("active", "demo")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class FrozenAdmin(admin.ModelAdmin):
    """Read-only: a release is made by publishing an export, and never changes (the database refuses it too)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Release)
class ReleaseAdmin(FrozenAdmin):
    list_display = ("number", "title", "item_count", "image_count", "manifest_sha256", "created_by", "created")


@admin.register(ReleasePublication)
class ReleasePublicationAdmin(FrozenAdmin):
    """A publication is a record of what happened: read here, recorded by the paths that publish (and the release
    page's form)."""

    list_display = ("release", "how", "when", "who", "where")
    list_filter = ("how",)
    raw_id_fields = ("release",)


@admin.register(ReleaseReservation)
class ReleaseReservationAdmin(FrozenAdmin):
    """A number taken before an export writes its files: made and ended by the export alone (a retry resumes it,
    the clean-up gives back one nobody will use)."""

    list_display = ("number", "experiment", "target", "export_job", "release", "placed", "created")
    list_filter = ("experiment",)
    raw_id_fields = ("export_job", "release")


@admin.register(ReleaseItem)
class ReleaseItemAdmin(FrozenAdmin):
    list_display = ("item_id", "release", "split", "position", "category", "domain", "swapped")
    list_filter = ("release", "split", "category", "domain")
    raw_id_fields = ("pair", "image_1", "image_2")


@admin.register(ImageEmbedding)
class ImageEmbeddingAdmin(admin.ModelAdmin):
    list_display = ("image", "fingerprint", "dim", "error", "created")
    list_filter = ("fingerprint",)
    raw_id_fields = ("image",)
    exclude = ("vector",)


@admin.register(VideoSkip)
class VideoSkipAdmin(admin.ModelAdmin):
    list_display = ("video", "user", "reason", "created")
    list_filter = ("reason",)
    raw_id_fields = ("video",)


@admin.register(PairDraft)
class PairDraftAdmin(admin.ModelAdmin):
    list_display = ("author", "video", "updated")
    raw_id_fields = ("video",)


@admin.register(CaptionBatch)
class CaptionBatchAdmin(admin.ModelAdmin):
    list_display = ("title", "selection", "fraction", "seed", "captions_per_item", "created_by", "created")
    list_filter = ("selection", "show_question", "allow_own_pairs")


@admin.register(CaptionTask)
class CaptionTaskAdmin(admin.ModelAdmin):
    list_display = ("batch", "pair", "slot", "status", "lease_holder", "lease_expires")
    list_filter = ("status", "batch")
    raw_id_fields = ("pair", "caption")


@admin.register(CaptionSkip)
class CaptionSkipAdmin(admin.ModelAdmin):
    list_display = ("task", "user", "created")
    raw_id_fields = ("task",)


@admin.register(CaptionReview)
class CaptionReviewAdmin(admin.ModelAdmin):
    list_display = ("caption", "reviewer", "decision", "created")
    list_filter = ("decision",)
    raw_id_fields = ("caption",)


@admin.register(TeamSettings)
class TeamSettingsAdmin(admin.ModelAdmin):
    list_display = ("double_review_rate", "updated", "updated_by")


@admin.register(Target)
class TargetAdmin(admin.ModelAdmin):
    list_display = ("category", "domain", "count", "updated")
    list_filter = ("category", "domain")


@admin.register(DoubleReview)
class DoubleReviewAdmin(admin.ModelAdmin):
    list_display = ("pair", "pair_version", "drawn_at", "second_reviewer", "second_decision", "second_at")
    list_filter = ("second_decision",)
    list_select_related = ("pair", "second_reviewer")
    raw_id_fields = ("pair", "first_review")


class ModelEndpointForm(forms.ModelForm):
    # Checked by check_base_url alone, as on every other path (Django's URL check refuses single-label hosts).
    base_url = forms.CharField(max_length=500, help_text=ModelEndpoint._meta.get_field("base_url").help_text)

    def clean_base_url(self):
        """The host rules of every other path (annotator.llm.endpoints.check_base_url)."""
        try:
            return check_base_url(self.cleaned_data["base_url"])
        except Invalid as refused:
            raise forms.ValidationError(refused.errors["base_url"]) from None


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(admin.ModelAdmin):
    form = ModelEndpointForm
    list_display = ("name", "base_url", "model_id", "key_source", "concurrency", "timeout_s", "created")
    search_fields = ("name", "model_id")
    # The key is set through add_model, the page or the API, which check it; here it is neither shown nor edited.
    exclude = ("api_key_encrypted",)
    readonly_fields = ("api_key_env",)

    def save_model(self, request, obj, form, change):
        # ModelEndpoint.save drops a stored key when the host changes; the admin says so, and what else now fails.
        had_key = bool(obj.api_key_encrypted)
        super().save_model(request, obj, form, change)
        if had_key and not obj.api_key_encrypted:
            self.message_user(
                request,
                f"The stored API key of {obj.name} was dropped: it was given for the old host. Register the key "
                "again for the new one.",
                messages.WARNING,
            )
        problem = key_problem(obj)
        if problem:
            self.message_user(request, f"The API key of {obj.name} will not be sent: {problem}.", messages.WARNING)


# Every source (issue 27), models that draft and the synthetic lab (issues 28, 29): read in the admin, changed
# through their pages.
@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    list_display = ("name", "domain", "layout", "location", "created")
    list_filter = ("domain", "layout")


@admin.register(SourceLicense)
class SourceLicenseAdmin(admin.ModelAdmin):
    list_display = ("source", "license", "note", "updated_by", "updated")
    raw_id_fields = ("updated_by",)


@admin.register(PairCandidate)
class PairCandidateAdmin(admin.ModelAdmin):
    list_display = ("pk", "origin", "status", "source", "domain", "similarity", "created")
    list_filter = ("origin", "status", "domain")
    raw_id_fields = ("image_1", "image_2", "collection", "job", "pair", "lease_holder", "dismissed_by")


@admin.register(CandidateSkip)
class CandidateSkipAdmin(admin.ModelAdmin):
    list_display = ("candidate", "user", "reason", "created")
    list_filter = ("reason",)
    raw_id_fields = ("candidate",)


@admin.register(ModelDraft)
class ModelDraftAdmin(admin.ModelAdmin):
    list_display = ("pk", "author", "endpoint_name", "category", "created")
    raw_id_fields = ("video",)


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    list_display = ("pk", "title", "family", "items_per_cell", "seed", "created")


@admin.register(SweepItem)
class SweepItemAdmin(admin.ModelAdmin):
    list_display = ("sweep", "cell", "index", "pair")
    raw_id_fields = ("sweep", "pair")


@admin.register(Comment)
class CommentAdmin(admin.ModelAdmin):
    list_display = ("pk", "pair", "caption", "author", "kind", "created", "resolved")
    list_filter = ("kind",)
    raw_id_fields = ("pair", "caption", "author", "resolved_by")


@admin.register(CommentNotice)
class CommentNoticeAdmin(admin.ModelAdmin):
    list_display = ("comment", "user", "mentioned", "read")
    raw_id_fields = ("comment", "user")


@admin.register(VideoHandover)
class VideoHandoverAdmin(admin.ModelAdmin):
    list_display = ("video", "from_user", "to_user", "by", "draft_saved", "created")
    raw_id_fields = ("video",)


# Records made by their own pages and services (bulk actions and their undo, model edits, guidelines, training splits):
# shown here to read, changed only where their rules are kept.
@admin.register(BulkAction)
class BulkActionAdmin(FrozenAdmin):
    list_display = ("job", "table", "action", "created", "undo_until", "undone_at")
    raw_id_fields = ("job",)


@admin.register(BulkChange)
class BulkChangeAdmin(FrozenAdmin):
    list_display = ("bulk_action", "item_id")
    raw_id_fields = ("bulk_action",)


@admin.register(EditTemplate)
class EditTemplateAdmin(FrozenAdmin):
    list_display = ("kind", "question", "updated")


@admin.register(ImageEdit)
class ImageEditAdmin(FrozenAdmin):
    list_display = ("__str__",)


@admin.register(Guideline)
class GuidelineAdmin(FrozenAdmin):
    list_display = ("category", "domain", "created")


@admin.register(GuidelineVersion)
class GuidelineVersionAdmin(FrozenAdmin):
    list_display = ("guideline", "number", "author", "created")


@admin.register(GuidelineExample)
class GuidelineExampleAdmin(FrozenAdmin):
    list_display = ("guideline", "pair", "kind", "created")
    raw_id_fields = ("pair",)


@admin.register(TrainingSet)
class TrainingSetAdmin(FrozenAdmin):
    list_display = ("release", "item_count", "seed", "limit", "created")


@admin.register(TrainingItem)
class TrainingItemAdmin(FrozenAdmin):
    list_display = ("training_set", "position", "pair")
    raw_id_fields = ("pair",)


@admin.register(ReleaseDiff)
class ReleaseDiffAdmin(FrozenAdmin):
    list_display = ("release", "previous")
    raw_id_fields = ("release", "previous")


@admin.register(MinedBlock)
class MinedBlockAdmin(FrozenAdmin):
    """A block pair's exactly scored pairs, kept until the mining job's merge writes its candidates."""

    list_display = ("job", "row_block", "column_block")
    raw_id_fields = ("job",)
