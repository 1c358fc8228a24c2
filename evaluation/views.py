"""HTML views of human-baseline studies."""

from __future__ import annotations
