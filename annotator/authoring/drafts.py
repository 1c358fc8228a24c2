"""Autosaved drafts of work items, and their optimistic versioning: the conflict a stale tab gets.

A pair workbench's state (a video's, a candidate pair's) is a PairDraft on the item (the kind's `draft_field`),
saved as the annotator types and never needing the lease: work is never lost. A caption's draft is its caption row
(annotator/captions), versioned the same way.

One annotator may have an item open in two tabs or browsers. Each autosave names the version of the draft it was
based on; a save based on an older one is refused with `DraftChanged` (409) rather than written over the newer
text, and the tab asks the annotator which one to keep. The versions: `next_draft_version`
(annotator/models/picking.py).
"""

from __future__ import annotations

import json

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotator.authoring.work import WorkKind
from annotator.models import PairDraft
from annotator.models.picking import next_draft_version
from subtlebench.errors import Conflict, Invalid

MAX_DRAFT_BYTES = 20_000


class DraftChanged(Conflict):
    def __init__(self, *, current: int, sent: int):
        self.current, self.sent = current, sent
        super().__init__(
            "The draft changed in another tab since this one last saved it: load the newer draft, or keep this "
            "tab's and save it over."
        )

    @property
    def errors(self) -> dict[str, list[str]]:
        return {"version": [f"The saved draft is version {self.current}."]}


def work_draft_save(kind: WorkKind, *, item, user, state: dict, version: int | None = None) -> PairDraft:
    """Store the workbench state as typed; it comes back on reload. Never needs the lease: work is never lost.

    `version` is the draft version the state was based on (0: no draft yet). Another tab of the same annotator
    may have saved since: then nothing is written and `DraftChanged` says which version is there now. Without a
    version (an older client) the save is last-writer-wins.
    """
    if not isinstance(state, dict):
        raise Invalid({"state": ["The draft must be a JSON object."]})
    if len(json.dumps(state)) > MAX_DRAFT_BYTES:
        raise Invalid({"state": [f"The draft is larger than {MAX_DRAFT_BYTES} bytes."]})
    target = {kind.draft_field: item}
    drafts = PairDraft.objects.filter(author=user, **target)

    def write_over(based_on) -> bool:
        return bool(based_on.update(state=state, version=PairDraft.next_version_expression(), updated=timezone.now()))

    with transaction.atomic():
        # A compare-and-set: the UPDATE writes only over the version the tab saw (over any, without a version).
        if write_over(drafts if version is None else drafts.filter(version=version)):
            return drafts.get()
        if version in (None, 0) and not drafts.exists():
            try:
                with transaction.atomic():  # two first saves of two tabs meet on the unique constraint
                    first = next_draft_version(0)
                    return PairDraft.objects.create(author=user, state=state, version=first, **target)
            except IntegrityError:
                if version is None and write_over(drafts):
                    return drafts.get()
        saved = drafts.first()
        if saved is not None and saved.state == state:
            # The same state arrived twice (a page's pagehide save landing after the reloaded page saved it from the
            # browser's copy): nothing to refuse, nothing to write.
            return saved
        raise DraftChanged(current=saved.version if saved else 0, sent=version)


def work_draft_of(kind: WorkKind, *, item, user) -> PairDraft:
    """The annotator's draft on the item; an unsaved empty one (version 0) when they have none."""
    target = {kind.draft_field: item}
    return PairDraft.objects.filter(author=user, **target).first() or PairDraft(author=user, **target)


def work_draft_delete(kind: WorkKind, *, item, user, version: int | None) -> None:
    """Delete the draft a submit came from. A draft another tab saved after the one the submit was based on is
    that tab's work: it stays."""
    drafts = PairDraft.objects.filter(author=user, **{kind.draft_field: item})
    if version is not None:
        drafts = drafts.filter(version=version)
    drafts.delete()
