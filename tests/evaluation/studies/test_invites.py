"""The study invites page in daily use (issue 26): the links as a CSV, the open link and the URL to give Prolific."""

from __future__ import annotations

import csv
import io
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils.html import escape

from annotator.models import Pair
from evaluation.studies import participation
from evaluation.studies import services as studies
from evaluation.studies.participation import PROLIFIC_PARAMETERS
from evaluation.studies.views import PROLIFIC_URL_PARAMETERS
from tests.factories import make_pair

pytestmark = pytest.mark.django_db


def study_with_links(open_cap: int = 0):
    for _ in range(3):
        make_pair(status=Pair.Status.ACCEPTED)
    # Three raters an item, every item a session: room for the three links (links past the room are not usable).
    study = studies.study_create(name="Daily", fraction=1, practice_count=0, open_cap=open_cap, raters_per_item=3)
    links = studies.study_invite(study=study, count=3)
    return study, links


def test_the_csv_lists_each_link_with_its_state(client_for, coordinator):
    study, links = study_with_links()
    links[1].consent()
    response = client_for(coordinator).get(f"/studies/{study.pk}/invites.csv")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv; charset=utf-8"
    assert f'filename="study-{study.pk}-invites.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert [row["id"] for row in rows] == [str(p.pk) for p in links]
    assert [row["link"] for row in rows] == [studies.invite_url(p) for p in links]
    assert [row["state"] for row in rows] == ["unused", "in progress", "unused"]
    assert {row["can_be_used"] for row in rows} == {"yes"}


def test_the_page_offers_copy_buttons_the_csv_and_the_prolific_url(client_for, coordinator):
    study, links = study_with_links(open_cap=5)
    html = client_for(coordinator).get(f"/studies/{study.pk}/invites/").content.decode()
    for link in links:
        assert f'data-copy="{studies.invite_url(link)}"' in html
    assert f'href="/studies/{study.pk}/invites.csv"' in html
    open_url = studies.open_url(study)
    assert f'<span class="mono" id="open-url">{open_url}</span>' in html
    prolific = open_url + PROLIFIC_URL_PARAMETERS
    assert f'<span class="mono" id="prolific-url">{escape(prolific)}</span>' in html


def test_the_prolific_url_carries_the_parameters_the_participant_pages_read():
    query = parse_qs(urlsplit("https://x/p/open/t/" + PROLIFIC_URL_PARAMETERS).query)
    assert list(query) == list(PROLIFIC_PARAMETERS) == ["PROLIFIC_PID", "STUDY_ID", "SESSION_ID"]
    assert query["PROLIFIC_PID"] == ["{{%PROLIFIC_PID%}}"]
    # What Prolific sends after filling them in is what the participant pages keep.
    filled = {"PROLIFIC_PID": "a" * 24, "STUDY_ID": "s1", "SESSION_ID": "x9"}
    assert participation.prolific_parameters(filled) == filled


def test_a_study_without_an_open_link_says_so_instead_of_a_prolific_url(client_for, coordinator):
    study, _ = study_with_links(open_cap=0)
    html = client_for(coordinator).get(f"/studies/{study.pk}/invites/").content.decode()
    assert 'id="no-open-link"' in html and 'id="prolific-url"' not in html and "/p/open/" not in html
