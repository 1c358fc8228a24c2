"""The authoring engine: one work queue for every kind of work item (work.py: take next, heartbeat, release, skip
and undo, submit once), the leases under it (leases.py) and the autosaved drafts (drafts.py)."""
