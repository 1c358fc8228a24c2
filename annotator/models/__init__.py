"""Every model of the annotator app, one module per workflow, re-exported here: `from annotator.models import Pair`."""

from annotator.models.bulk import BulkAction, BulkChange
from annotator.models.captions import (
    Caption,
    CaptionBatch,
    CaptionBatchQuerySet,
    CaptionQuerySet,
    CaptionReview,
    CaptionSkip,
    CaptionTask,
    CaptionTaskQuerySet,
)
from annotator.models.collections import CandidateSkip, Collection, PairCandidate, PairCandidateQuerySet
from annotator.models.conversations import Comment, CommentNotice
from annotator.models.drafting import ModelDraft
from annotator.models.editing import EditKind, EditTemplate, ImageEdit
from annotator.models.guidelines import Guideline, GuidelineExample, GuidelineVersion
from annotator.models.jobs import Job, JobCancelled, JobItem, JobTask
from annotator.models.leases import Leasable, LeaseQuerySet
from annotator.models.llm import ModelEndpoint
from annotator.models.mining import MinedBlock
from annotator.models.pairs import Pair, PairQuerySet, Review
from annotator.models.picking import PairDraft, VideoHandover, VideoSkip
from annotator.models.releases import (
    Release,
    ReleaseDiff,
    ReleaseFrozen,
    ReleaseItem,
    ReleasePublication,
    ReleaseReservation,
    TrainingItem,
    TrainingSet,
)
from annotator.models.similarity import EmbeddingModel, ImageEmbedding
from annotator.models.sources import SourceLicense
from annotator.models.stats import DoubleReview, Target, TeamSettings
from annotator.models.synthetic import Sweep, SweepItem
from annotator.models.taxonomy import CATEGORY_ABBREVIATIONS, Category, Domain
from annotator.models.videos import Frame, Image, Video

__all__ = [
    "BulkAction",
    "BulkChange",
    "CATEGORY_ABBREVIATIONS",
    "Caption",
    "CaptionBatch",
    "CaptionBatchQuerySet",
    "CaptionQuerySet",
    "CaptionReview",
    "CaptionSkip",
    "CaptionTask",
    "CandidateSkip",
    "CaptionTaskQuerySet",
    "Category",
    "Collection",
    "Comment",
    "CommentNotice",
    "Domain",
    "EditKind",
    "EditTemplate",
    "DoubleReview",
    "EmbeddingModel",
    "Frame",
    "Guideline",
    "GuidelineExample",
    "GuidelineVersion",
    "Image",
    "ImageEdit",
    "ImageEmbedding",
    "Job",
    "JobCancelled",
    "JobItem",
    "JobTask",
    "LeaseQuerySet",
    "Leasable",
    "ModelDraft",
    "MinedBlock",
    "ModelEndpoint",
    "Pair",
    "PairCandidate",
    "PairCandidateQuerySet",
    "PairDraft",
    "PairQuerySet",
    "Release",
    "ReleaseDiff",
    "ReleaseFrozen",
    "ReleaseItem",
    "ReleasePublication",
    "ReleaseReservation",
    "Review",
    "SourceLicense",
    "Target",
    "Sweep",
    "SweepItem",
    "TeamSettings",
    "TrainingItem",
    "TrainingSet",
    "Video",
    "VideoHandover",
    "VideoSkip",
]
