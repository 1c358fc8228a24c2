"""benchmark/ loads without Django, a database or torch: a fresh interpreter imports every module of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import benchmark

MODULES = sorted(
    f"benchmark.{path.stem}" for path in Path(benchmark.__file__).parent.glob("*.py") if path.stem != "__init__"
)


def test_every_module_imports_without_django_or_torch():
    code = (
        f"import sys; import {', '.join(MODULES)}; "
        "loaded = sorted(m for m in ('django', 'torch', 'transformers', 'annotator', 'evaluation', 'subtlebench') "
        "if m in sys.modules); print(loaded)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(benchmark.__file__).parents[1]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert {"benchmark.records", "benchmark.card", "benchmark.protocol", "benchmark.apportion"} <= set(MODULES)
