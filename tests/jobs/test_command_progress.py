"""Progress bars of the long commands: drawn when stdout is a terminal (a real pty here), absent when the output
is captured or piped, so logs and scripts see only the command's own lines."""

from __future__ import annotations

import io
import os
import pty
import threading

import pytest
from django.core.management import call_command

from annotator.models import ImageEmbedding
from tests.export_fixtures import make_pair, record, write_dataset
from tests.factories import make_video
from tests.similarity_fixtures import dinov3  # noqa: F401 (a fixture, used by name)
from tests.video_fixtures import *  # noqa: F403 (fixtures)

pytestmark = pytest.mark.django_db

BAR = "%|"  # tqdm draws "<description>:  50%|#####     | 1/2"


def on_a_terminal(*args) -> str:
    """Run a command with its stdout on the slave side of a new pty; return what the terminal received."""
    master, slave = pty.openpty()
    received = bytearray()

    def read():  # drained while the command runs, so a full pty buffer can never block its writes
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the slave side is closed and everything was read
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    terminal = os.fdopen(slave, "w", buffering=1)
    try:
        assert terminal.isatty()
        call_command(*args, stdout=terminal)
    finally:
        terminal.close()
        reader.join(timeout=10)
        os.close(master)
    return received.decode(errors="replace")


def captured(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_export_benchmark_draws_a_bar_on_a_terminal_and_none_when_captured(tmp_path):
    for _ in range(3):
        make_pair()
    shown = on_a_terminal("export_benchmark", "--out", str(tmp_path / "a"), "--val-fraction", "0")
    assert "Exporting:" in shown and BAR in shown and "3/3" in shown
    assert "Exported 3 items" in shown

    quiet = captured("export_benchmark", "--out", str(tmp_path / "b"), "--val-fraction", "0")
    assert "Exported 3 items" in quiet
    assert BAR not in quiet and "\r" not in quiet and "Exporting" not in quiet


def test_import_pairs_draws_a_bar_on_a_terminal_and_none_when_captured(tmp_path):
    shown = on_a_terminal("import_pairs", str(write_dataset(tmp_path / "a", [record(1), record(2)])))
    assert "Importing:" in shown and BAR in shown and "2/2" in shown and "Imported 2 pairs" in shown

    quiet = captured("import_pairs", str(write_dataset(tmp_path / "b", [record(3)])))
    assert quiet.splitlines() == ["Imported 1 pairs, 2 images, 0 captions."]


def test_import_videos_sync_draws_a_bar_on_a_terminal_and_none_when_captured(h264_video, settings):
    settings.FRAME_MAX_SIDE = 160
    settings.THUMBNAIL_MAX_SIDE = 64
    shown = on_a_terminal("import_videos", str(h264_video.parent), "--sync", "--frames", "2")
    assert "Sampling:" in shown and BAR in shown and "1/1" in shown and "1 video(s) sampled" in shown

    quiet = captured("import_videos", str(h264_video.parent), "--sync", "--frames", "2")
    assert "1 already sampled" in quiet and BAR not in quiet and "\r" not in quiet and "Sampling" not in quiet


@pytest.mark.torch
def test_compute_embeddings_sync_draws_a_bar_on_a_terminal_and_none_when_captured(dinov3):  # noqa: F811
    make_video(frames=3)
    shown = on_a_terminal("compute_embeddings", "--all", "--sync")
    assert "Embedding:" in shown and BAR in shown and "3/3" in shown and "3 images embedded" in shown
    assert ImageEmbedding.objects.count() == 3

    make_video(frames=2)
    quiet = captured("compute_embeddings", "--all", "--sync")
    assert "2 images embedded" in quiet and BAR not in quiet and "\r" not in quiet and "Embedding" not in quiet
