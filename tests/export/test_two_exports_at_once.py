"""Two exports at once to one empty target: both check it empty when they start, and the switch into place checks it
again under the target's lock, so the one that finishes first wins and the other fails, naming the export in the way,
and removes what it uploaded. Replacing stays a thing asked for, never a race's outcome."""

from __future__ import annotations

import pytest

from annotator.export.services import ExportOptions, ExportTargetTaken, benchmark_export, s3_export_current
from subtlebench.storage import s3_client
from tests.export_fixtures import make_pair

pytestmark = pytest.mark.django_db


class RunsAnotherExportFirst:
    """The progress of the first export: once it writes its first item, a second export to the same target runs to
    its end (two exports at once, the second quicker)."""

    def __init__(self, options: ExportOptions):
        self.options, self.result = options, None

    def start(self, total=None):
        pass

    def advance(self, steps=1, error=None):
        if self.result is None:
            self.result = benchmark_export(options=self.options)


def test_of_two_exports_at_once_to_one_empty_s3_target_one_wins_and_the_other_fails_clearly(s3_bucket):
    make_pair()
    make_pair()
    uri = f"s3://{s3_bucket}/bench"
    quicker = RunsAnotherExportFirst(ExportOptions(out=uri))
    with pytest.raises(ExportTargetTaken, match=rf"{uri} already holds an export .*replace it explicitly"):
        benchmark_export(options=ExportOptions(out=uri), progress=quicker)
    assert s3_export_current(uri)["version"] == quicker.result["version"]  # the winner stays current
    keys = [o["Key"] for o in s3_client().list_objects_v2(Bucket=s3_bucket, Prefix="bench/")["Contents"]]
    versions = {key.split("/")[2].removesuffix(".zip") for key in keys if key.startswith("bench/versions/")}
    assert versions == {quicker.result["version"]}  # the loser's upload is removed

    replaced = benchmark_export(options=ExportOptions(out=uri, replace=True))  # asked for: it replaces
    assert s3_export_current(uri)["version"] == replaced["version"] != quicker.result["version"]
