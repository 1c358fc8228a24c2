"""The benchmark's taxonomy: the ten difference types (categories), the image domains, the binary categories and
their two options, the paper's abbreviations, and each category's example or standard question."""

from __future__ import annotations

# In the paper's order (its tables' columns), lowercase as the records hold them.
CATEGORIES: tuple[str, ...] = (
    "attribute",
    "state",
    "emotion",
    "temporal",
    "spatial",
    "existence",
    "quantity",
    "quality",
    "viewpoint",
    "action",
)
DOMAINS: tuple[str, ...] = ("natural", "gaming", "industrial", "aerial", "medical", "synthetic")

# The paper's column abbreviations, in the paper's order.
ABBREVIATIONS: dict[str, str] = dict(
    zip(CATEGORIES, ("AT", "ST", "EM", "TM", "SP", "EX", "QN", "QL", "VP", "AC"), strict=True)
)

# The categories whose options are the two images: a benchmark whose answers lean to one side rewards position bias.
FIRST_IMAGE = "first image"
SECOND_IMAGE = "second image"
BINARY_OPTIONS: tuple[str, str] = (FIRST_IMAGE, SECOND_IMAGE)
BINARY_CATEGORIES: frozenset[str] = frozenset({"state", "emotion", "temporal", "quantity", "quality"})

# Viewpoint's options: how the camera moved from the first image to the second.
VIEWPOINT_MOVES: tuple[str, ...] = (
    "left",
    "right",
    "up",
    "down",
    "forward",
    "backward",
    "rotate clockwise",
    "rotate counterclockwise",
)

# The example questions of BENCHMARK.md's table, the paper's own kind (rule templates write them; the official
# adapter's example record uses the state one verbatim): valid questions wherever they come in. The editor shows them
# as placeholders rather than values, since several name an object of one imagined pair ("the mug"). Temporal and
# viewpoint have a standard question instead (their options are fixed by the category), which the editor fills in.
EXAMPLE_QUESTIONS: dict[str, str] = {
    "attribute": "What changed about the mug?",
    "state": "In which image is the apple peeled more?",
    "emotion": "In which image does the person look happier?",
    "spatial": "How did the cup move?",
    "existence": "What was added in the second image?",
    "quantity": "In which image are there more people?",
    "quality": "Which image has better quality?",
    "action": "What did the person do between the two images?",
}
STANDARD_QUESTIONS: dict[str, str] = {
    "temporal": "Which image was taken later?",
    "viewpoint": "How did the camera move from the first image to the second?",
}
