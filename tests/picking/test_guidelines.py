"""Guidelines per category and domain: Markdown shown safely, each edit a new version, the version in force kept with
each pair at submit, the panel beside the editor per category, the review's panel and a rejection that cites one, the
coordinators' pages and example pairs."""

from __future__ import annotations

import uuid

import pytest

from annotator.models import Guideline, GuidelineVersion, Pair, Review
from annotator.picking import services as picking
from annotator.picking.guidelines import guideline_example_add, guideline_save, markdown_html
from subtlebench.errors import Invalid
from tests.factories import make_pair, make_video

pytestmark = pytest.mark.django_db


def submit(author, category="temporal", **fields):
    video = make_video(frames=3, domain=fields.pop("domain", "natural"))
    picking.video_heartbeat(video=video, user=author)
    values = {"question": "Which image was taken later?"} if category == "temporal" else fields
    pair, _ = picking.pair_submit(
        user=author, video=video, index_a=0, index_b=2, category=category, client_key=uuid.uuid4().hex, **values
    )
    picking.video_release(video=video, user=author)
    return pair


def test_markdown_is_rendered_from_escaped_text_and_links_only_to_safe_addresses():
    html = markdown_html(
        "## Rule\n- one **visible** change, *small*\n- `code <b>`\n\n<script>alert(1)</script> "
        "[ok](https://example.org/a?b=1&c=2) [bad](javascript:alert(1)) [sneaky](//evil.example)"
    )
    assert "<h5>Rule</h5>" in html and "<li>one <strong>visible</strong> change, <em>small</em></li>" in html
    assert "<code>code &lt;b&gt;</code>" in html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '<a href="https://example.org/a?b=1&amp;c=2" rel="noopener noreferrer">ok</a>' in html
    assert "javascript:" not in html.replace("[bad](javascript:alert(1))", "") and 'href="//' not in html


def test_each_edit_is_a_new_version_and_an_unchanged_or_empty_text_is_refused(coordinator):
    first = guideline_save(category="temporal", domain="", body="Frames of one shot.", user=coordinator)
    second = guideline_save(category="temporal", domain="", body="Frames of one shot, no cuts.", user=coordinator)
    assert (first.number, second.number, first.guideline_id) == (1, 2, second.guideline_id)
    assert GuidelineVersion.objects.get(pk=first.pk).body == "Frames of one shot."  # kept as it was
    with pytest.raises(Invalid, match="Nothing changed: version 2"):
        guideline_save(category="temporal", domain="", body="Frames of one shot, no cuts.\n", user=coordinator)
    with pytest.raises(Invalid, match="empty"):
        guideline_save(category="temporal", domain="", body="  ", user=coordinator)
    with pytest.raises(Invalid, match="'medieval' is not one"):
        guideline_save(category="temporal", domain="medieval", body="x", user=coordinator)


def test_a_pair_keeps_the_version_in_force_when_it_was_submitted(annotator, coordinator):
    every = guideline_save(category="temporal", domain="", body="v1 for every domain", user=coordinator)
    early = submit(annotator)
    assert early.guideline_version == every
    newer = guideline_save(category="temporal", domain="", body="v2 for every domain", user=coordinator)
    gaming = guideline_save(category="temporal", domain="gaming", body="gaming's own", user=coordinator)
    later = submit(annotator)
    of_gaming = submit(annotator, domain="gaming")
    other = submit(annotator, category="action", answer="waved", distractors=["sat"], question="What did he do?")
    assert Pair.objects.get(pk=early.pk).guideline_version == every  # not moved by the later versions
    assert (later.guideline_version, of_gaming.guideline_version, other.guideline_version) == (newer, gaming, None)


def test_the_panel_beside_the_editor_shows_the_chosen_categorys_guideline(client_for, annotator, coordinator):
    guideline_save(category="temporal", domain="", body="- **one** shot", user=coordinator)
    guideline_save(category="action", domain="natural", body="One action <b>only</b>.", user=coordinator)
    client = client_for(annotator)
    temporal = client.get("/guidelines/panel/", {"category": "temporal", "domain": "natural"}).content.decode()
    assert "<li><strong>one</strong> shot</li>" in temporal and "temporal · every domain" in temporal
    action = client.get("/guidelines/panel/", {"category": "action", "domain": "natural"}).content.decode()
    assert "One action &lt;b&gt;only&lt;/b&gt;." in action and "one</strong> shot" not in action
    gaming = client.get("/guidelines/panel/", {"category": "action", "domain": "gaming"}).content.decode()
    assert "No guideline for action pairs of gaming yet" in gaming
    page = client.get(f"/work/videos/{make_video().pk}/").content.decode()
    assert 'id="guidelines-body" hx-get="/guidelines/panel/"' in page


def test_review_shows_the_pairs_version_and_a_rejection_cites_one(client_for, annotator, reviewer, coordinator):
    old = guideline_save(category="temporal", domain="", body="Old rule.", user=coordinator)
    pair = submit(annotator)
    current = guideline_save(category="temporal", domain="", body="New rule.", user=coordinator)
    other = guideline_save(category="action", domain="", body="Actions.", user=coordinator)
    client = client_for(reviewer)
    page = client.get(f"/review/pairs/{pair.pk}/").content.decode()
    assert "Old rule." in page and "submitted under v1" in page and "A newer version is in force" in page
    start = page.index('<select id="reject-guideline">')
    cites = page[start : page.index("</select>", start)]  # the rejection's choice of guideline, not the page's others
    assert f'<option value="{current.pk}">' in cites and f'value="{other.pk}"' not in cites
    refused = client.post(
        f"/api/pairs/{pair.pk}/review/",
        {"decision": "reject", "version": pair.version, "reason": "No cut.", "guideline_version": other.pk},
        content_type="application/json",
    )
    assert refused.status_code == 400 and "Cite a guideline of temporal pairs" in str(refused.json())
    assert Pair.objects.get(pk=pair.pk).status == Pair.Status.SUBMITTED
    response = client.post(
        f"/api/pairs/{pair.pk}/review/",
        {"decision": "reject", "version": pair.version, "reason": "A cut between them.", "guideline_version": old.pk},
        content_type="application/json",
    )
    assert response.status_code == 200
    assert Review.objects.get(pair=pair).guideline_version == old
    history = client.get(f"/review/pairs/{pair.pk}/").content.decode()
    assert f'cites <a href="/guidelines/versions/{old.pk}/">temporal · every domain v1</a>' in history
    # The author reads the rule beside the reason: on the work page and in the workbench's list of pairs.
    author = client_for(annotator)
    work = author.get("/work/").content.decode()
    assert f'A cut between them. <a href="/guidelines/versions/{old.pk}/">(the guideline it cites)</a>' in work
    workbench = author.get(f"/work/videos/{pair.video_id}/")
    [row] = workbench.context["config"]["pairs"]
    assert (row["rejection"], row["rejection_guideline"]) == ("A cut between them.", old.pk)


def test_coordinators_write_versions_and_add_accepted_pairs_as_examples(client_for, coordinator):
    client = client_for(coordinator)
    response = client.post("/guidelines/temporal/all/", {"action": "save", "body": "# Temporal\nOne shot."})
    assert response.status_code == 302
    client.post("/guidelines/temporal/all/", {"action": "save", "body": "# Temporal\nOne shot, no cut."})
    guideline = Guideline.objects.get(category="temporal", domain="")
    assert [v.number for v in guideline.versions.order_by("number")] == [1, 2]
    accepted = make_pair(category="temporal", status=Pair.Status.ACCEPTED)
    submitted = make_pair(category="temporal", status=Pair.Status.SUBMITTED)
    client.post(
        "/guidelines/temporal/all/", {"action": "example", "pair": accepted.pk, "kind": "good", "note": "One cue."}
    )
    refused = client.post(
        "/guidelines/temporal/all/", {"action": "example", "pair": submitted.pk, "kind": "bad"}, follow=True
    )
    assert f"Pair {submitted.pk} is submitted: examples are taken from accepted pairs." in refused.content.decode()
    assert [(e.pair_id, e.kind, e.note) for e in guideline.examples.all()] == [(accepted.pk, "good", "One cue.")]
    page = client.get("/guidelines/temporal/all/").content.decode()
    assert "<h4>Temporal</h4>" in page and "One cue." in page and "v2" in page
    listing = client.get("/guidelines/").content.decode()
    assert 'href="/guidelines/temporal/all/"' in listing
    panel = client.get("/guidelines/panel/", {"category": "temporal", "domain": "natural"}).content.decode()
    assert f"#{accepted.pk}" in panel and "One cue." in panel


def test_an_example_must_be_of_the_guidelines_category(coordinator):
    guideline = guideline_save(category="temporal", domain="gaming", body="x", user=coordinator).guideline
    action = make_pair(category="action", status=Pair.Status.ACCEPTED)
    with pytest.raises(Invalid, match="this guideline is for temporal · gaming"):
        guideline_example_add(guideline=guideline, pair_id=action.pk, kind="good", note="", user=coordinator)


def test_the_guideline_pages_need_the_right_role(client, client_for, annotator, coordinator):
    version = guideline_save(category="temporal", domain="", body="Rule.", user=coordinator)
    assert client_for(annotator).get("/guidelines/").status_code == 403
    assert client_for(annotator).post("/guidelines/temporal/all/", {"action": "save", "body": "x"}).status_code == 403
    assert client_for(annotator).get(f"/guidelines/versions/{version.pk}/").status_code == 200
    assert client_for(coordinator).get("/guidelines/nothing/all/").status_code == 404
    assert client_for(coordinator).delete("/guidelines/temporal/all/").status_code == 405
    client.logout()
    assert client.get("/guidelines/panel/").status_code == 302
    assert GuidelineVersion.objects.count() == 1


def test_a_study_that_uses_them_shows_participants_the_items_guideline_text(client, coordinator):
    from evaluation.studies import participation
    from evaluation.studies import services as studies

    guideline_save(category="temporal", domain="", body="Look for **one** change in time.", user=coordinator)
    for _ in range(3):
        make_pair(category="temporal", status=Pair.Status.ACCEPTED)
    pages = []
    for shows in (True, False):
        study = studies.study_create(name=f"S{shows}", fraction=1, practice_count=0, show_guidelines=shows)
        participant = studies.participant_create(study=study)
        participant.consent()
        assert participation.participant_next_practice(participant=participant) is None
        pages.append(client.get(f"/p/{participant.token}/items/").content.decode())
    assert '<summary>Guideline</summary><div class="guideline-body"><p>Look for <strong>one</strong>' in pages[0]
    assert "Look for" not in pages[1]
