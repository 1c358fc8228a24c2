"""Demo pairs for `seed_demo`: a draft, a submitted, an accepted and a rejected pair on the sampled videos."""

from __future__ import annotations

from django.contrib.auth.models import User

from annotator import picking
from annotator.models import Category, Pair, PairDraft, Video


def seed_demo_pairs(*, author: str = "annotator1", reviewer: str = "reviewer") -> int:
    """Leave pairs in every state on the first sampled videos with frames; safe to re-run. Returns pairs made."""
    annotator = User.objects.filter(username=author).first()
    checker = User.objects.filter(username=reviewer).first()
    videos = [v for v in Video.objects.filter(status=Video.Status.SAMPLED).order_by("id")[:10] if v.frames.count() >= 4]
    if annotator is None or checker is None or not videos:
        return 0
    plans = [
        ("submitted", Category.TEMPORAL, {"question": "Which image was taken later?"}),
        ("accepted", Category.QUALITY, {"question": "Which image has better quality?", "answer_frame": "a"}),
        (
            "rejected",
            Category.ACTION,
            {
                "question": "What did the person do between the two images?",
                "answer": "raised a hand",
                "distractors": ["sat down", "turned around"],
            },
        ),
    ]
    made = 0
    for number, (target, category, fields) in enumerate(plans):
        video = videos[number % len(videos)]
        index_a, index_b = number, number + 2
        try:
            pair, created = picking.pair_submit(
                user=annotator,
                video=video,
                index_a=index_a,
                index_b=index_b,
                category=category,
                client_key=f"demo-pair-{video.yt8m_id}-{number}"[:64],
                **fields,
            )
        except picking.Conflict:
            continue  # someone is working on this video right now: leave it alone
        if not created or pair.status != Pair.Status.SUBMITTED:
            continue
        picking.video_release(video=video, user=annotator, reason=None)
        made += 1
        if target == "accepted" and pair.similarity_problem() is None:
            picking.pair_review(pair=pair, reviewer=checker, decision="accept", version=pair.version)
        elif target == "rejected":
            picking.pair_review(
                pair=pair,
                reviewer=checker,
                decision="reject",
                version=pair.version,
                reason="The hand is raised in both frames: pick frames where the action differs.",
            )
    video = videos[-1]
    if not PairDraft.objects.filter(author=annotator, video=video).exists():
        picking.pair_draft_save(
            video=video,
            user=annotator,
            state={
                "cursor": 3,
                "a": 1,
                "b": 3,
                "category": "state",
                "question": "In which image is the door more open?",
            },
        )
    return made
