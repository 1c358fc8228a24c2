"""The edit jobs' fixtures: the fake editing server and its endpoint."""

from tests.editing.edit_fixtures import edit_server, editor_endpoint  # noqa: F401 (fixtures, used by name)
