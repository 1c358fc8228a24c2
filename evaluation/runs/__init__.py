"""Models in the loop: OpenAI-compatible model endpoints and their evaluation runs (the official protocol)."""
