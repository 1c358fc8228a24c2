"""The API's contract: a schema that validates without a warning and says what the endpoints really take and
answer, and one error body, `{"detail": ..., "errors": {field: [...]}}`, for every kind of error."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from drf_spectacular.drainage import GENERATOR_STATS
from rest_framework import exceptions

from api.errors import exception_handler
from tests.conftest import make_user
from tests.factories import make_pair, make_video

ERROR_REF = "#/components/schemas/Error"


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    """The schema a client downloads from /api/schema/."""
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user=User(username="schema-reader"))  # the schema is for logged-in users (issue 13)
    with django_db_blocker.unblock():
        response = client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def component(schema: dict, ref: str) -> dict:
    return schema["components"]["schemas"][ref.removeprefix("#/components/schemas/")]


def request_body(schema: dict, path: str, method: str = "post") -> dict:
    return component(
        schema, schema["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    )


def ok_schema(schema: dict, path: str, method: str = "get") -> dict:
    return schema["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]


def assert_error_body(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"detail", "errors"}, body
    assert isinstance(body["detail"], str) and body["detail"]
    assert isinstance(body["errors"], dict)
    assert all(isinstance(m, str) for messages in body["errors"].values() for m in messages)
    return body


# --- The schema ---------------------------------------------------------------------------------------------


def test_the_schema_validates_without_a_single_warning(tmp_path, capsys):
    GENERATOR_STATS.reset()  # warnings are counted per process; start from none
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    printed = capsys.readouterr()
    assert not GENERATOR_STATS, printed.err
    assert "Warning" not in printed.err and "Error" not in printed.err
    assert "/api/pairs/submit/" in (tmp_path / "schema.yaml").read_text()


def test_the_schema_is_made_once_the_same_for_every_reader_and_anew_when_its_settings_change(client, annotator):
    """/api/schema/ answers the schema it made first (api/schema.py): the one a fresh generator makes, to every
    reader; still only to a logged-in one; and a change of the routes it is made from makes it again."""
    from django.test import override_settings
    from drf_spectacular.generators import SchemaGenerator

    from api.schema import _schemas as kept_schemas
    from subtlebench.tokens import api_token_create

    _, key = api_token_create(user=annotator)
    reader = {"HTTP_AUTHORIZATION": f"Token {key}"}
    schemas = [client.get("/api/schema/", {"format": "json"}, **reader).json() for _ in range(2)]
    client.force_login(make_user("cora", "coordinator"))
    schemas.append(client.get("/api/schema/", {"format": "json"}).json())
    client.logout()
    fresh = json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True)))  # as JSON would read
    assert all(schema == fresh for schema in schemas)
    assert len(kept_schemas) == 1  # made for the first request, answered to the next two
    assert client.get("/api/schema/").status_code in (401, 403)  # kept, and still for logged-in readers only
    with override_settings(ROOT_URLCONF="tests.api.schema_urls"):
        assert set(client.get("/api/schema/", {"format": "json"}, **reader).json()["paths"]) == {"/api/token/"}
    assert client.get("/api/schema/", {"format": "json"}, **reader).json() == fresh


def test_the_schema_is_rendered_once_for_each_format_and_anew_when_its_settings_change(client, annotator):
    """The kept schema's renderings are kept too (api/schema.py): the same bytes drf-spectacular's own renderer
    writes, for YAML (the default) and JSON, each rendered once; an error's body is not kept; a change of the routes
    drops them with the schema."""
    from django.test import override_settings
    from drf_spectacular.renderers import OpenApiJsonRenderer, OpenApiYamlRenderer

    from api.schema import _renderings as kept_renderings
    from api.schema import _schemas as kept_schemas
    from subtlebench.tokens import api_token_create

    _, key = api_token_create(user=annotator)
    reader = {"HTTP_AUTHORIZATION": f"Token {key}"}
    kept_schemas.clear()
    kept_renderings.clear()
    yaml_answers = [client.get("/api/schema/", **reader) for _ in range(2)]
    json_answers = [client.get("/api/schema/", {"format": "json"}, **reader) for _ in range(2)]
    (schema,) = kept_schemas.values()
    assert [answer.content for answer in yaml_answers] == [OpenApiYamlRenderer().render(schema)] * 2
    assert yaml_answers[0]["Content-Type"].startswith("application/vnd.oai.openapi;")
    as_json = OpenApiJsonRenderer().render(schema, "application/vnd.oai.openapi+json")
    assert [answer.content for answer in json_answers] == [as_json] * 2
    assert len(kept_renderings) == 2  # one for each format, each made for its first request
    assert client.get("/api/schema/").status_code in (401, 403)  # an error's body: rendered, not kept
    assert len(kept_renderings) == 2
    with override_settings(ROOT_URLCONF="tests.api.schema_urls"):
        assert kept_renderings == {}
        assert b"/api/pairs/submit/" not in client.get("/api/schema/", **reader).content


def test_pair_and_caption_bodies_are_documented_each_on_its_own_endpoint(schema):
    pair_submit = request_body(schema, "/api/pairs/submit/")
    assert {"video", "index_a", "index_b", "category", "client_key"} <= set(pair_submit["properties"])
    caption_submit = request_body(schema, "/api/captions/tasks/{task_id}/submit/")
    assert set(caption_submit["properties"]) == {"text", "client_key"}
    pair_review = request_body(schema, "/api/pairs/{pair_id}/review/")
    assert {"decision", "version", "corrections"} <= set(pair_review["properties"])
    caption_review = request_body(schema, "/api/captions/{caption_id}/review/")
    assert set(caption_review["properties"]) == {"decision", "reason", "text"}


def test_a_paged_list_is_documented_with_its_pages(schema):
    page = component(schema, ok_schema(schema, "/api/videos/")["$ref"])
    assert {"count", "next", "previous", "results"} <= set(page["properties"])
    assert page["properties"]["results"]["items"]["$ref"].endswith("/VideoOutput")
    parameters = {p["name"] for p in schema["paths"]["/api/videos/"]["get"]["parameters"]}
    assert {"limit", "offset", "status"} <= parameters


def test_every_list_answers_the_way_the_schema_says(schema, db):
    """Pages where the schema documents pages, plain arrays where it documents arrays."""
    admin = User.objects.create_superuser("root", password="password")  # holds every role
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(admin)
    checked = 0
    for path, operations in schema["paths"].items():
        get = operations.get("get")
        if get is None or "{" in path or path.startswith("/api/schema"):
            continue
        documented = get["responses"]["200"]["content"]["application/json"]["schema"]
        paged = "$ref" in documented and "results" in component(schema, documented["$ref"])["properties"]
        if not paged and documented.get("type") != "array":
            continue
        body = client.get(path).json()
        if paged:
            assert set(body) == {"count", "next", "previous", "results"}, path
        else:
            assert isinstance(body, list), path
        checked += 1
    assert checked >= 6


def test_every_operation_documents_its_errors_with_the_error_body(schema):
    operations = [
        (path, method, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in ("get", "post", "put", "patch", "delete") and not path.startswith("/api/schema")
    ]
    assert len(operations) > 30
    for path, method, operation in operations:
        errors = {code: r for code, r in operation["responses"].items() if code.startswith("4")}
        assert errors, f"{method.upper()} {path} documents no 4xx response"
        for code, response in errors.items():
            assert response["content"]["application/json"]["schema"]["$ref"] == ERROR_REF, (path, method, code)
        if operation.get("security") and {} not in operation["security"]:
            assert "403" in errors, f"{method.upper()} {path} needs a login but documents no 403"
        if "{" in path:
            assert "404" in errors, f"{method.upper()} {path} names an object but documents no 404"
        if "requestBody" in operation:
            assert "400" in errors, f"{method.upper()} {path} takes a body but documents no 400"
    error = component(schema, ERROR_REF)
    assert set(error["properties"]) == {"detail", "errors"} and set(error["required"]) == {"detail", "errors"}


# --- One error body for every kind of error -----------------------------------------------------------------


def test_a_serializer_error_names_each_bad_field(client_for, annotator):
    response = client_for(annotator).post("/api/pairs/submit/", {"index_a": "x"}, content_type="application/json")
    body = assert_error_body(response, 400)
    assert {"video", "index_a", "index_b", "category", "client_key"} <= set(body["errors"])
    assert "video: This field is required." in body["detail"]


def test_a_service_field_error_names_its_field(client_for, coordinator):
    pair = make_pair()
    response = client_for(coordinator).post(
        f"/api/pairs/{pair.pk}/similarity-override/", {"reason": " "}, content_type="application/json"
    )
    body = assert_error_body(response, 400)
    assert list(body["errors"]) == ["reason"] and "Write why" in body["errors"]["reason"][0]


def test_a_malformed_body_is_an_invalid_request(client_for, annotator):
    response = client_for(annotator).post("/api/pairs/submit/", "{not json", content_type="application/json")
    assert assert_error_body(response, 400)["errors"] == {}


def test_a_wrong_role_is_forbidden(client_for, annotator):
    body = assert_error_body(client_for(annotator).get("/api/exports/"), 403)
    assert body["errors"] == {}


def test_someone_elses_object_is_forbidden_by_the_service(client_for, coordinator):
    own = make_pair(status="submitted", author=coordinator)
    response = client_for(coordinator).post(
        f"/api/pairs/{own.pk}/review/", {"decision": "accept", "version": own.version}, content_type="application/json"
    )
    assert "your own pair" in assert_error_body(response, 403)["detail"]


def test_an_anonymous_request_is_refused(client):
    response = client.get("/api/jobs/")
    assert response.status_code in (401, 403)
    assert "credentials were not provided" in assert_error_body(response, response.status_code)["detail"]


def test_an_unknown_id_is_not_found(client_for, annotator):
    assert_error_body(client_for(annotator).get("/api/videos/999999/"), 404)
    assert_error_body(client_for(annotator).get("/api/captions/tasks/999999/draft/"), 405)  # PUT only
    response = client_for(annotator).put("/api/captions/tasks/999999/draft/", {"text": ""}, "application/json")
    assert_error_body(response, 404)


def test_a_bad_query_parameter_names_it(client_for, annotator):
    video = make_video(frames=2)
    body = assert_error_body(client_for(annotator).get(f"/api/videos/{video.pk}/suggestions/?limit=0"), 400)
    assert list(body["errors"]) == ["limit"]


def test_a_decided_pair_is_a_conflict(client_for, reviewer):
    pair = make_pair(status="accepted")
    response = client_for(reviewer).post(
        f"/api/pairs/{pair.pk}/review/",
        {"decision": "accept", "version": pair.version},
        content_type="application/json",
    )
    body = assert_error_body(response, 409)
    assert "accepted already" in body["detail"] and body["errors"] == {}


def test_a_wrong_method_is_refused_in_the_same_shape(client_for, annotator):
    assert "not allowed" in assert_error_body(client_for(annotator).post("/api/jobs/"), 405)["detail"]


def test_drf_errors_keep_their_status_and_headers_in_the_one_body():
    throttled = exception_handler(exceptions.Throttled(wait=3), {})
    assert throttled.status_code == 429 and throttled["Retry-After"] == "3"
    assert set(throttled.data) == {"detail", "errors"} and "throttled" in throttled.data["detail"]
    listed = exception_handler(exceptions.ValidationError(["First.", "Second."]), {})
    assert listed.status_code == 400 and listed.data == {"detail": "First. Second.", "errors": {}}
    nested = exception_handler(exceptions.ValidationError({"categories": {0: ["Not a category."]}}), {})
    assert nested.data == {"detail": "categories: 0: Not a category.", "errors": {"categories": ["0: Not a category."]}}


# --- Every input has its bounds (issue 13) ------------------------------------------------------------------


def unbounded(schema: dict, value: dict, where: str) -> list[str]:
    """What in one documented input value has no bound: strings without maxLength (unless an enum), integers
    without minimum and maximum, lists without maxItems; nested objects and items are walked."""
    if "$ref" in value:
        value = component(schema, value["$ref"])
    if "allOf" in value or "oneOf" in value:
        return [
            problem for part in value.get("allOf", value.get("oneOf")) for problem in unbounded(schema, part, where)
        ]
    if "enum" in value or value.get("readOnly"):
        return []
    kind = value.get("type")
    if kind == "string" and "maxLength" not in value and value.get("format") not in ("date-time", "date", "binary"):
        return [f"{where}: a string without maxLength"]
    if kind == "integer" and not {"minimum", "maximum"} <= set(value):
        return [f"{where}: an integer without minimum and maximum"]
    if kind == "array":
        problems = [] if "maxItems" in value else [f"{where}: a list without maxItems"]
        return problems + unbounded(schema, value.get("items", {}), f"{where}[]")
    if kind == "object" or "properties" in value:
        return [
            p
            for name, field in value.get("properties", {}).items()
            for p in unbounded(schema, field, f"{where}.{name}")
        ]
    return []


def test_every_request_field_and_query_parameter_is_bounded(schema):
    """A string with no length limit stores a 1 MB question; an unbounded integer fails its column (a 500)."""
    problems = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            label = f"{method.upper()} {path}"
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query":
                    problems += unbounded(schema, parameter["schema"], f"{label} ?{parameter['name']}")
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                problems += unbounded(schema, body["schema"], f"{label} body")
    assert not problems, "\n".join(problems)


def test_every_paged_list_documents_its_bounds_and_its_400(schema):
    paged = [
        (path, item["get"])
        for path, item in schema["paths"].items()
        if "get" in item and {"limit", "offset"} <= {p["name"] for p in item["get"].get("parameters", [])}
    ]
    assert len(paged) >= 4
    for path, operation in paged:
        limit = next(p for p in operation["parameters"] if p["name"] == "limit")
        assert limit["schema"]["maximum"] == 500, path
        assert "400" in operation["responses"], f"GET {path} refuses a bad limit but documents no 400"
