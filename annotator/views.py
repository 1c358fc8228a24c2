"""HTML views of the annotator app."""

from __future__ import annotations
