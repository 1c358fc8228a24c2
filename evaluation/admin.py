from django.contrib import admin

from evaluation.models import (
    Assignment,
    JudgeVerdict,
    ModelEvaluation,
    ModelItemResult,
    OtherBenchmark,
    OtherBenchmarkItem,
    OtherBenchmarkScore,
    Participant,
    Study,
    StudyItem,
)


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ("name", "fraction", "seed", "raters_per_item", "split", "pool_size", "created")
    list_filter = ("split", "raters_per_item")
    search_fields = ("name",)


@admin.register(StudyItem)
class StudyItemAdmin(admin.ModelAdmin):
    list_display = ("study", "pair", "kind", "category", "domain", "position")
    list_filter = ("study", "kind", "category", "domain")
    raw_id_fields = ("pair",)


@admin.register(Participant)
class ParticipantAdmin(admin.ModelAdmin):
    list_display = ("study", "prolific_pid", "via_open_link", "consented_at", "finished_at")
    list_filter = ("study", "via_open_link")
    search_fields = ("prolific_pid",)


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ("participant", "item", "sequence", "served_at", "answered_at", "correct", "too_fast")
    list_filter = ("correct", "too_fast", "item__study")
    raw_id_fields = ("participant", "item")


@admin.register(JudgeVerdict)
class JudgeVerdictAdmin(admin.ModelAdmin):
    list_display = ("result", "reviewer", "matches", "created")
    list_filter = ("matches",)
    raw_id_fields = ("result",)


@admin.register(ModelEvaluation)
class ModelEvaluationAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "endpoint",
        "name",
        "source",
        "release",
        "split",
        "study_id",
        "items",
        "answered",
        "correct",
        "failed",
        "created",
    )
    list_filter = ("source",)
    list_select_related = ("endpoint", "release")
    raw_id_fields = ("job", "export_job", "release")


@admin.register(ModelItemResult)
class ModelItemResultAdmin(admin.ModelAdmin):
    list_display = (
        "evaluation",
        "question_id",
        "category",
        "predicted_letter",
        "correct_letter",
        "is_correct",
        "failure",
    )
    list_filter = ("failure", "category")
    search_fields = ("question_id",)
    raw_id_fields = ("evaluation", "pair", "release_item")


@admin.register(OtherBenchmark)
class OtherBenchmarkAdmin(admin.ModelAdmin):
    list_display = ("name", "higher_is_better", "created")
    search_fields = ("name",)


@admin.register(OtherBenchmarkScore)
class OtherBenchmarkScoreAdmin(admin.ModelAdmin):
    list_display = ("benchmark", "model", "score")
    list_filter = ("benchmark",)


@admin.register(OtherBenchmarkItem)
class OtherBenchmarkItemAdmin(admin.ModelAdmin):
    list_display = ("benchmark", "item_id", "similarity", "accuracy")
    list_filter = ("benchmark",)
