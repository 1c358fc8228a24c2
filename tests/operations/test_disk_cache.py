"""The suite's cache of built folders (tests/disk_cache.py: the tiny models, the demo's videos): a folder is built
once and read after that, and a build cut short leaves nothing under its name."""

from __future__ import annotations

import pytest

from tests.disk_cache import cached_folder


def test_a_folder_is_built_once_and_read_from_the_cache_after_that(tmp_path):
    builds = []

    def build(folder):
        builds.append(folder)
        (folder / "weights.bin").write_bytes(b"built")

    first = cached_folder(tmp_path / "cache", "model-1", build)
    again = cached_folder(tmp_path / "cache", "model-1", build)
    assert first == again == tmp_path / "cache" / "model-1"
    assert len(builds) == 1 and (first / "weights.bin").read_bytes() == b"built"
    assert sorted(path.name for path in (tmp_path / "cache").iterdir()) == [".build.lock", "model-1"]


def test_a_build_cut_short_leaves_nothing_under_its_name_and_the_next_run_builds_it(tmp_path):
    def broken(folder):
        (folder / "half.bin").write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        cached_folder(tmp_path / "cache", "model-1", broken)
    assert not (tmp_path / "cache" / "model-1").exists()

    folder = cached_folder(tmp_path / "cache", "model-1", lambda folder: (folder / "whole.bin").write_bytes(b"ok"))
    assert [path.name for path in folder.iterdir()] == ["whole.bin"]
