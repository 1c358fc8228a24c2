"""Optimistic versioning of autosaved drafts (the pair workbench's, captions'): the conflict a stale tab gets.

One annotator may have a video or a caption task open in two tabs or browsers. Each autosave names the version of
the draft it was based on; a save based on an older one is refused with `DraftChanged` (409) rather than written
over the newer text, and the tab asks the annotator which one to keep. The versions: `next_draft_version`
(annotator/models/picking.py).
"""

from __future__ import annotations

from subtlebench.errors import Conflict


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
