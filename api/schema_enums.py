"""One schema name per choice set (SPECTACULAR_SETTINGS ENUM_NAME_OVERRIDES): several models have a `status`, and
categories and domains appear both alone and in lists; without names drf-spectacular invents hashed ones."""

from annotator.llm.profiles import EFFORTS
from annotator.models import Category, Domain, EditKind, ImageEdit, Job, Pair, Video

CATEGORY = Category
DOMAIN = Domain
VIDEO_STATUS = Video.Status
REVIEW_STATUS = Pair.Status  # the same four states as Caption.Status: draft, submitted, accepted, rejected
JOB_STATUS = Job.Status
FRAME = [("a", "a"), ("b", "b")]  # the workbench's frame A or B: a submit's answer frame and a region's frame

REASONING_EFFORT = [(effort, effort) for effort in EFFORTS]  # a run's, a judge's and an extractor's effort: one enum

EDIT_KIND = EditKind  # an edit job's kind of change (annotator.models.editing)
EDIT_REFUSE_REASON = ImageEdit.RefuseReason
EDIT_STATUS = ImageEdit.Status
