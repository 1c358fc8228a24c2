"""Demo data for `make run` and the screenshots: videos, similarities, pairs, captions and a study."""
