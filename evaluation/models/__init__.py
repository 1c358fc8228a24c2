"""Every model of the evaluation app, one module per part, re-exported: `from evaluation.models import Study`."""

from evaluation.models.results import OtherBenchmark, OtherBenchmarkItem, OtherBenchmarkScore
from evaluation.models.runs import ModelEvaluation, ModelItemResult
from evaluation.models.studies import (
    DEFAULT_CONSENT,
    DEFAULT_INSTRUCTIONS,
    DEFAULT_WITHDRAWAL,
    PRESENTED,
    Assignment,
    JudgeVerdict,
    Participant,
    Presentation,
    Study,
    StudyItem,
    address_key,
    device_key,
    new_completion_code,
    new_item_token,
    new_order_seed,
    new_token,
    normal_pid,
)

__all__ = [
    "DEFAULT_CONSENT",
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_WITHDRAWAL",
    "PRESENTED",
    "Assignment",
    "JudgeVerdict",
    "ModelEvaluation",
    "ModelItemResult",
    "OtherBenchmark",
    "OtherBenchmarkItem",
    "OtherBenchmarkScore",
    "Participant",
    "Presentation",
    "Study",
    "StudyItem",
    "address_key",
    "device_key",
    "new_completion_code",
    "new_item_token",
    "new_order_seed",
    "new_token",
    "normal_pid",
]
