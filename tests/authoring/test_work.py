"""The work queue's one life cycle (annotator/authoring/work.py) for a kind of work item the app does not have: gaming
videos to check again, longest first, defined here by plugging into the engine and nothing else. Take next (its own
order and precondition), heartbeat, expiry, save a draft, submit once, skip, undo the skip, release, each as the
app's own kinds have them. And the life cycle has one home: no other module takes or ends leases by hand."""

from __future__ import annotations

import ast
from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from annotator.authoring.drafts import DraftChanged, work_draft_delete, work_draft_of, work_draft_save
from annotator.authoring.work import (
    WorkKind,
    client_key_clean,
    work_claim,
    work_end_lease,
    work_heartbeat,
    work_open_to,
    work_release,
    work_skip,
    work_skip_undo,
    work_submitted,
    work_take_next,
)
from annotator.models import Category, Domain, Pair, Video, VideoSkip
from subtlebench.errors import Conflict, Forbidden, Invalid
from tests.conftest import make_user
from tests.factories import make_pair, make_video
from tests.test_import_contract import FILES, parse

pytestmark = pytest.mark.django_db


class RecheckWork(WorkKind):
    """Sampled gaming videos nobody has made a pair of yet, the longest first; a video needs two frames."""

    model = Video
    noun = "gaming video"
    skip_model, skip_field = VideoSkip, "video"
    skip_reasons, skip_for_everyone = VideoSkip.Reason, VideoSkip.FOR_EVERYONE
    draft_field = "video"

    def label(self, item) -> str:
        return f"gaming video {item.yt8m_id}"

    def in_queue(self, user):
        paired = Pair.objects.filter(video=OuterRef("pk"))
        return Video.objects.filter(status=Video.Status.SAMPLED, domain=Domain.GAMING).filter(~Exists(paired))

    def queues(self, items, user):
        return [items.order_by("-duration", "pk")]

    def refusal(self, item, user) -> str:
        return "" if item.domain == Domain.GAMING else f"Video {item.yt8m_id} is not a gaming video."

    def unready(self, item) -> str:
        return "" if item.frame_count >= 2 else f"Video {item.yt8m_id} has fewer than two frames."


RECHECKS = RecheckWork()


def recheck_submit(*, video: Video, user, question: str, client_key: str) -> tuple[Pair, bool]:
    """The new kind's submit: a pair of the video's first two frames, once per client key."""
    client_key = client_key_clean(client_key)
    refusal = "This client key belongs to another annotator's pair."
    earlier = work_submitted(Pair.objects, client_key=client_key, user=user, refusal=refusal)
    if earlier is not None:
        return earlier, False
    with transaction.atomic():
        locked = work_claim(RECHECKS, item=video, user=user)
        pair = make_pair(
            video=locked, status=Pair.Status.SUBMITTED, author=user, question=question, client_key=client_key
        )
        work_draft_delete(RECHECKS, item=locked, user=user, version=None)
        work_end_lease(RECHECKS, item=locked)  # the pair takes it out of the queue (in_queue)
    return pair, True


@pytest.fixture
def videos(db):
    return {
        "long": make_video(frames=3, every=2.0, domain=Domain.GAMING),  # 6 s
        "short": make_video(frames=2, every=1.0, domain=Domain.GAMING),  # 2 s
        "one_frame": make_video(frames=1, every=10.0, domain=Domain.GAMING),  # the longest, but one frame
        "natural": make_video(frames=5, every=3.0),  # not this kind's
    }


def test_a_new_kind_leases_by_its_own_order_and_precondition(videos, annotator, annotator2):
    first = work_take_next(RECHECKS, user=annotator)
    assert first == videos["long"] and first.is_held_by(annotator)  # one_frame is set aside, not leased
    assert work_take_next(RECHECKS, user=annotator) == first  # the one held, again
    assert work_take_next(RECHECKS, user=annotator2) == videos["short"]
    assert work_take_next(RECHECKS, user=make_user("carl", "annotator")) is None
    assert Video.objects.get(pk=videos["one_frame"].pk).lease_holder is None
    assert not work_open_to(RECHECKS, annotator).filter(pk=videos["natural"].pk).exists()


def test_a_new_kinds_lease_is_renewed_refused_to_others_and_lapses_without_a_sweep(videos, annotator, annotator2):
    held = work_take_next(RECHECKS, user=annotator)
    Video.objects.filter(pk=held.pk).update(lease_expires=timezone.now() + timedelta(seconds=5))
    assert work_heartbeat(RECHECKS, item=held, user=annotator).lease_expires > timezone.now() + timedelta(minutes=5)
    with pytest.raises(Conflict, match=f"^Gaming video {held.yt8m_id} is now leased to another annotator"):
        work_heartbeat(RECHECKS, item=held, user=annotator2)
    with pytest.raises(Conflict, match=f"^You hold gaming video {held.yt8m_id}: finish or skip it first.$"):
        work_heartbeat(RECHECKS, item=videos["short"], user=annotator)
    with pytest.raises(Conflict, match="is not a gaming video"):
        work_heartbeat(RECHECKS, item=videos["natural"], user=annotator2)
    with pytest.raises(Conflict, match="fewer than two frames"):
        work_heartbeat(RECHECKS, item=videos["one_frame"], user=annotator2)

    Video.objects.filter(pk=held.pk).update(lease_expires=timezone.now() - timedelta(seconds=1))
    assert not Video.objects.held().exists()  # nothing swept it: every query reads the expiry
    assert work_take_next(RECHECKS, user=annotator2) == held  # the longest, free again
    with pytest.raises(Conflict, match="someone else took it"):
        work_heartbeat(RECHECKS, item=held, user=annotator)
    assert work_take_next(RECHECKS, user=annotator) == videos["short"]


def test_a_new_kinds_skip_release_and_undo(videos, annotator, annotator2, coordinator):
    held = work_take_next(RECHECKS, user=annotator)
    with pytest.raises(Forbidden, match="only its lease holder or a coordinator"):
        work_skip(RECHECKS, item=held, user=annotator2, reason=VideoSkip.Reason.NO_PAIR)
    with pytest.raises(Conflict, match="nothing to release"):
        work_release(RECHECKS, item=held, user=annotator2)
    with pytest.raises(Invalid):
        work_skip(RECHECKS, item=held, user=annotator, reason="bored")
    skip = work_skip(RECHECKS, item=held, user=annotator, reason=VideoSkip.Reason.NO_PAIR, note=" all alike ")
    assert (skip.video, skip.user, skip.note) == (held, annotator, "all alike")
    assert work_take_next(RECHECKS, user=annotator) == videos["short"]  # the skipped one is not offered again
    assert work_take_next(RECHECKS, user=annotator2) == held  # to others it is
    work_release(RECHECKS, item=held, user=annotator2)
    assert Video.objects.get(pk=held.pk).lease_holder is None

    work_release(RECHECKS, item=videos["short"], user=annotator)
    assert work_take_next(RECHECKS, user=annotator) == videos["short"]  # released, not skipped: still offered
    work_release(RECHECKS, item=videos["short"], user=annotator)
    assert work_skip_undo(RECHECKS, skip_id=skip.pk, user=annotator) == held
    assert work_take_next(RECHECKS, user=annotator) == held  # offered again, and the longest

    flagged = work_skip(RECHECKS, item=held, user=coordinator, reason=VideoSkip.Reason.BAD_VIDEO)
    assert Video.objects.get(pk=held.pk).lease_holder is None  # a coordinator flags it, whoever held it
    assert not work_open_to(RECHECKS, annotator2).filter(pk=held.pk).exists()  # out of everyone's queue
    with pytest.raises(Forbidden):
        work_skip_undo(RECHECKS, skip_id=flagged.pk, user=annotator)


def test_a_new_kinds_draft_and_submit_once(videos, annotator, annotator2):
    held = work_take_next(RECHECKS, user=annotator)
    saved = work_draft_save(RECHECKS, item=held, user=annotator, state={"question": "half"}, version=0)
    with pytest.raises(DraftChanged):  # a second tab that never saw the first save
        work_draft_save(RECHECKS, item=held, user=annotator, state={"question": "other"}, version=0)
    assert work_draft_of(RECHECKS, item=held, user=annotator).state == {"question": "half"}
    assert work_draft_of(RECHECKS, item=held, user=annotator2).version == 0  # nobody else's

    question = "Which image was taken later?"
    pair, created = recheck_submit(video=held, user=annotator, question=question, client_key="recheck-1")
    again, created_again = recheck_submit(video=held, user=annotator, question="changed", client_key="recheck-1")
    assert (created, created_again, again, again.question) == (True, False, pair, question)
    assert Pair.objects.filter(video=held).count() == 1 and pair.category == Category.TEMPORAL
    held.refresh_from_db()
    assert held.lease_holder is None and not work_open_to(RECHECKS, annotator2).filter(pk=held.pk).exists()
    assert work_draft_of(RECHECKS, item=held, user=annotator).pk is None and saved.pk
    with pytest.raises(Invalid, match="another annotator's pair"):
        recheck_submit(video=videos["short"], user=annotator2, question=question, client_key="recheck-1")
    with pytest.raises(Invalid, match="8 to 64"):
        recheck_submit(video=videos["short"], user=annotator2, question=question, client_key="short")


LEASE_STEPS = {"lease_acquire", "lease_release", "LeaseHeld"}


def test_only_the_authoring_engine_takes_and_ends_leases():
    """The sources plug into the work queue: none takes, renews or ends a lease by hand, as the three copies did."""
    found = []
    for module, path in FILES.items():
        if module.startswith("annotator.authoring") or "annotator.authoring.leases" not in path.read_text():
            continue
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.ImportFrom) and node.module == "annotator.authoring.leases":
                found += [f"{module} imports {alias.name}" for alias in node.names if alias.name in LEASE_STEPS]
    assert found == []
