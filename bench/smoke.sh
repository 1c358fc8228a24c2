#!/usr/bin/env bash
# Every bench/ script at a tiny size (`make bench-smoke`): a check that each still runs and exits 0, not a
# measurement (no figure is compared with anything). Run under `python -m devtools.localservices --`, which sets
# DATABASE_URL and CELERY_BROKER_URL to the checkout's embedded servers.
#
# Left out: suite.py and side_by_side.py, which run the test suite itself (minutes), and synthetic_frames.py, a module
# the GPU benchmarks import. The GPU benchmarks run their BENCH_TINY mode, on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
export PYTHON

run() {
    local started=$SECONDS
    echo "--- $*"
    "$@"
    echo "--- $1 ${2:-}: ok in $((SECONDS - started)) s"
}

"$PYTHON" manage.py migrate --no-input -v 0
run "$PYTHON" bench/caption_flags.py 200
run "$PYTHON" bench/collection_import.py --scenes 3
run "$PYTHON" bench/data_manager.py --clients 1 --seconds 1 --pairs 200 --videos 10 --captions 50 --workers 1 --database sb_dmbench_smoke
run "$PYTHON" bench/export.py --items 20 --frames 40 --large 40 --rounds 1
BENCH_ONLY=model_server_killed_and_restarted,model_server_answers_500,model_server_trickles run "$PYTHON" bench/faults.py
BENCH_TINY=1 run bash bench/gpu_similarity.sh
BENCH_TINY=1 run bash bench/gpu_worker.sh
run "$PYTHON" bench/hostile_masks.py --side 400
run "$PYTHON" bench/import_memory.py --width 300 --height 200
run "$PYTHON" bench/lease_load.py --clients 2 --seconds 1 --videos 5 --frames-per-video 3 --workers 1 --database sb_picking_smoke
run "$PYTHON" bench/mining.py --sizes 1000 --methods numpy chosen --planted 20
run "$PYTHON" bench/model_eval.py --items 20 --concurrency 2 --latency 0.001
run "$PYTHON" bench/psychometric_coverage.py --sweeps 5
run "$PYTHON" bench/reply_limit.py --limit-mib 0.1 --factor 2
run "$PYTHON" bench/sample_frames.py --seconds 8 --every 2
run "$PYTHON" bench/similarity.py --frames 8 --pairs 16 --batch 4
run "$PYTHON" bench/synthetic.py --pairs 2
