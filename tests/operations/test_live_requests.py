"""The flush after a browser test waits for the live server's last request (`wait_for_live_requests`,
tests/conftest.py): a request the browser gave up on is still run to its end by the server, and the flush must not
run before its last write."""

from __future__ import annotations

import pytest
import requests
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client

from tests.conftest import LIVE_REQUESTS, make_user, wait_for_live_requests

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_request_the_server_is_still_answering_holds_the_flush_until_it_ends(live_server):
    client = Client()
    client.force_login(make_user("alice", "annotator"))
    cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    # A file far larger than the socket's buffers: the server is writing it until the client has read it all or
    # hung up.
    name = default_storage.save("frames/large/000001.jpg", ContentFile(b"\xff\xd8\xff" + bytes(32 * 2**20)))
    assert wait_for_live_requests(seconds=5)
    with requests.get(f"{live_server.url}/media/{name}", cookies=cookies, stream=True, timeout=30) as response:
        assert response.status_code == 200
        assert LIVE_REQUESTS["under_way"] == 1
        assert not wait_for_live_requests(seconds=0.5)
    # The client hung up: the server's write fails, the request ends.
    assert wait_for_live_requests(seconds=15)
    assert LIVE_REQUESTS["under_way"] == 0
