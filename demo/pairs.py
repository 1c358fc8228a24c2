"""Demo pairs for `seed_demo`: questions that fit the demo videos, in every state, by two annotators.

Each pair goes through the same services as the workbench and the review page: submit (scored from the stored
embeddings), then accept or reject. A pair whose frames lie far apart fails the subtlety rule and stays
submitted, for a coordinator to look at.
"""

from __future__ import annotations

from django.contrib.auth.models import User

from annotator.authoring.drafts import work_draft_save
from annotator.models import Category, PairDraft, Video
from annotator.picking import services as picking
from benchmark.taxonomy import STANDARD_QUESTIONS

CAMERA = STANDARD_QUESTIONS["viewpoint"]
LATER = STANDARD_QUESTIONS["temporal"]


def plan(video, a, b, decision, author, category, question, answer="", distractors=(), answer_frame=""):
    """One demo pair: frames A and B of a video (0.5 s apart each), its question, what the reviewer does."""
    fields = {"category": category, "question": question, "answer": answer, "distractors": list(distractors)}
    if answer_frame:
        fields["answer_frame"] = answer_frame
    return video, a, b, fields, decision, author


PAN, ZOOM, TABLE, LIGHT = "demo_pan_street", "demo_forward_zoom", "demo_table_shapes", "demo_evening_light"
# fmt: off
PLANS = [
    plan(PAN, 2, 3, "accept", "annotator1", Category.VIEWPOINT, CAMERA, "right", ["left", "up", "down"]),
    plan(PAN, 9, 10, "accept", "annotator2", Category.VIEWPOINT, CAMERA, "right", ["left", "rotate clockwise"]),
    plan(PAN, 14, 16, "accept", "annotator1", Category.TEMPORAL, LATER),
    plan(ZOOM, 3, 4, "accept", "annotator1", Category.VIEWPOINT, CAMERA, "forward", ["backward", "left", "right"]),
    plan(ZOOM, 12, 13, "accept", "annotator2", Category.VIEWPOINT, CAMERA, "forward", ["backward", "up"]),
    plan(ZOOM, 18, 20, "accept", "annotator2", Category.TEMPORAL, LATER),
    plan(ZOOM, 6, 7, "reject", "annotator1", Category.VIEWPOINT, CAMERA, "left", ["forward", "right"]),
    plan(TABLE, 4, 6, "accept", "annotator1", Category.SPATIAL, "How did the red ball move?", "to the right",
         ["to the left", "towards the cup"]),
    plan(TABLE, 11, 13, "accept", "annotator2", Category.EXISTENCE, "What was added to the shelf in the second image?",
         "a yellow ball", ["a blue box", "a white cup", "a second red ball"]),
    plan(TABLE, 10, 12, "accept", "annotator1", Category.QUANTITY, "In which image are there more balls?",
         answer_frame="b"),
    plan(TABLE, 17, 19, "accept", "annotator2", Category.TEMPORAL, LATER),
    plan(TABLE, 1, 2, "reject", "annotator2", Category.ACTION, "What did the person do?", "waved", ["sat down"]),
    plan(TABLE, 20, 22, "leave", "annotator1", Category.SPATIAL, "How did the blue box move?", "to the right",
         ["to the left", "up"]),
    plan(LIGHT, 5, 8, "accept", "annotator1", Category.ATTRIBUTE, "What changed about the light?",
         "it became warmer and dimmer", ["it became brighter", "it turned blue"]),
    plan(LIGHT, 15, 17, "accept", "annotator2", Category.QUALITY, "Which image is brighter?", answer_frame="a"),
    # The light changes fast here: the demo model scores it about 0.75, under 0.8, so it waits as submitted.
    plan(LIGHT, 1, 3, "accept", "annotator1", Category.TEMPORAL, LATER),
    plan(LIGHT, 20, 22, "leave", "annotator2", Category.TEMPORAL, LATER),
    # Too far apart: the demo model scores it below 0.8, so it cannot be accepted.
    plan(LIGHT, 0, 16, "accept", "annotator2", Category.TEMPORAL, LATER),
]
# fmt: on
REJECT_REASONS = {
    "demo_forward_zoom": "The camera moves forward here, not left: correct the answer and resubmit.",
    "demo_table_shapes": "Nobody is in these frames: an action question does not fit.",
}


def seed_demo_pairs(*, reviewer: str = "reviewer") -> int:
    """Leave pairs in every state on the demo videos; safe to re-run (client keys). Returns the pairs made."""
    checker = User.objects.filter(username=reviewer).first()
    videos = {video.yt8m_id: video for video in Video.objects.filter(status=Video.Status.SAMPLED)}
    if checker is None:
        return 0
    made = 0
    for number, (yt8m_id, index_a, index_b, fields, decision, author_name) in enumerate(PLANS):
        video, author = videos.get(yt8m_id), User.objects.filter(username=author_name).first()
        if video is None or author is None or video.frame_count <= max(index_a, index_b):
            continue
        try:
            pair, created = picking.pair_submit(
                user=author,
                video=video,
                index_a=index_a,
                index_b=index_b,
                client_key=f"demo-pair-{number:02d}-{yt8m_id}"[:64],
                **fields,
            )
        except picking.Conflict:
            continue  # someone is working on this video right now: leave it alone
        if not created:
            continue  # made by an earlier run, which took no lease this time
        picking.video_release(video=video, user=author, reason=None)
        made += 1
        if decision == "accept" and pair.similarity_problem() is None:
            picking.pair_review(pair=pair, reviewer=checker, decision="accept", version=pair.version)
        elif decision == "reject":
            reason = REJECT_REASONS[yt8m_id]
            picking.pair_review(pair=pair, reviewer=checker, decision="reject", version=pair.version, reason=reason)
    annotator = User.objects.filter(username="annotator1").first()
    video = videos.get("demo_evening_light")
    if annotator and video and not PairDraft.objects.filter(author=annotator, video=video).exists():
        work_draft_save(
            picking.VIDEOS,
            item=video,
            user=annotator,
            state={"cursor": 9, "a": 9, "b": 11, "category": "attribute", "question": "What changed about the sky?"},
        )
    return made
