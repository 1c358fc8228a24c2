"""Each source's license and citation on the collections page: its defaults shown (MVTec-AD's for an MVTec-shaped
collection, YouTube-8M's for video frames), a coordinator records other terms, a license that is no Hub id is refused
and nothing is stored; only a coordinator may."""

from __future__ import annotations

import pytest

from annotator.models import Collection, SourceLicense
from tests.export_fixtures import make_pair

pytestmark = pytest.mark.django_db


@pytest.fixture
def sources():
    Collection.objects.create(name="bottles", domain="industrial", layout=Collection.Layout.MVTEC, location="/mvtec")
    make_pair()  # a video pair: source yt8m


def row_of(html: str, source: str) -> str:
    """A source's row of the licenses table."""
    start = html.index(f'<td class="mono">{source}', html.index('id="source-licenses"'))
    return html[start : html.index("</tr>", start)]


def test_the_page_shows_each_sources_default_terms(client_for, coordinator, sources):
    html = client_for(coordinator).get("/collections/").content.decode()
    bottles, yt8m = row_of(html, "bottles"), row_of(html, "yt8m")
    assert "cc-by-nc-sa-4.0" in bottles and "collection" in bottles and "default" in bottles
    assert "cc-by-4.0" in yt8m and "bergmann2019mvtec" not in yt8m and "abuelhaija2016youtube8m" in yt8m


def test_a_coordinator_records_a_sources_terms_and_the_page_shows_them(client_for, coordinator, sources):
    client = client_for(coordinator)
    sent = {"source": "bottles", "license": "cc-by-4.0", "note": "relicensed", "citation": "@misc{b, title={B}}"}
    response = client.post("/collections/licenses/", sent, follow=True)
    assert "its items go out under cc-by-4.0" in response.content.decode()
    row = SourceLicense.objects.get(source="bottles")
    assert (row.license, row.note, row.citation) == ("cc-by-4.0", "relicensed", sent["citation"])
    assert row.updated_by == coordinator
    bottles = row_of(client.get("/collections/").content.decode(), "bottles")
    assert "cc-by-4.0" in bottles and "relicensed" in bottles and "default" not in bottles


def test_a_license_that_is_no_hub_id_is_refused_and_nothing_is_stored(client_for, coordinator, sources):
    response = client_for(coordinator).post(
        "/collections/licenses/", {"source": "bottles", "license": "CC BY 4.0"}, follow=True
    )
    assert "is not a license id of the Hugging Face Hub" in response.content.decode()
    assert not SourceLicense.objects.exists()


def test_only_a_coordinator_may_record_terms_and_only_by_post(client, client_for, annotator, coordinator, sources):
    sent = {"source": "bottles", "license": "mit"}
    assert client.post("/collections/licenses/", sent).status_code == 302  # to the login page
    assert client_for(annotator).post("/collections/licenses/", sent).status_code == 403
    assert client_for(coordinator).put("/collections/licenses/").status_code == 405
    assert not SourceLicense.objects.exists()
