#!/usr/bin/env bash
# Every bench/ script at a tiny size (`make bench-smoke`, and CI after `make test`): a check that each still runs and
# exits 0, not a measurement (no figure is compared with anything). Run under `python -m devtools.localservices --`,
# which sets DATABASE_URL and CELERY_BROKER_URL to the checkout's embedded servers (var/bench-smoke/).
#
# Left out: suite.py and side_by_side.py, which run the test suite itself (minutes), and synthetic_frames.py, a module
# the GPU benchmarks import. The GPU benchmarks run their BENCH_TINY mode, on the CPU: gpu_worker.sh (gpu_worker.py)
# runs gpu_similarity.sh (gpu_similarity.py) inside it, as its reference figure, so that one is not run twice.
# The faults bench runs the rows that need no more than its instance's start: the model server's and the start
# checks', the unit left on a dead worker and the full scratch disk (a tmpfs: needs root, as CI has).
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

# The scripts make databases of their own on this server (CREATE DATABASE copies template1) and migrate them: with
# template1 migrated first, once, each copy starts migrated and its script's `migrate` has nothing left to do (a full
# migrate is about 20 s of CPU, and six scripts make a database). The server is the smoke run's own.
template1=$("$PYTHON" -c 'import os, urllib.parse as u; print(u.urlparse(os.environ["DATABASE_URL"])._replace(path="/template1").geturl())')
DATABASE_URL="$template1" "$PYTHON" manage.py migrate --no-input -v 0
"$PYTHON" manage.py migrate --no-input -v 0
run "$PYTHON" bench/caption_flags.py 200
run "$PYTHON" bench/collection_import.py --scenes 3
run "$PYTHON" bench/data_manager.py --clients 1 --seconds 1 --pairs 100 --videos 5 --captions 20 --workers 1 --database sb_dmbench_smoke
run "$PYTHON" bench/export.py --items 10 --frames 20 --large 20 --rounds 1
run "$PYTHON" bench/frame_at_time.py --seconds 8 --repeat 1
BENCH_ONLY=model_server_killed_and_restarted,model_server_answers_500,model_server_trickles,wrong_database_port,unit_left_on_a_dead_worker,s3_import_onto_a_full_scratch_disk \
    run "$PYTHON" bench/faults.py
BENCH_TINY=1 BENCH_VIDEOS=1 BENCH_FRAMES=8 BENCH_BATCH=8 run bash bench/gpu_worker.sh
run "$PYTHON" bench/hostile_masks.py --side 200
run "$PYTHON" bench/import_memory.py --width 300 --height 200
run "$PYTHON" bench/lease_load.py --clients 2 --seconds 1 --videos 5 --frames-per-video 3 --workers 1 --database sb_picking_smoke
run "$PYTHON" bench/mining.py --sizes 600 --methods numpy chosen flat ivf hnsw --plan-images 5000 --block 200 --job 600 --job-block 200
run "$PYTHON" bench/model_eval.py --items 10,30 --concurrency 2 --latency 0.001 --warmup 5 --profile 30
run "$PYTHON" bench/psychometric_coverage.py --sweeps 5
run "$PYTHON" bench/reply_limit.py --limit-mib 0.1 --factor 2
run "$PYTHON" bench/report_figures.py --items 500
run "$PYTHON" bench/sample_frames.py --seconds 8 --steps 2
run "$PYTHON" bench/stats_pages.py --pairs 200 --videos 10 --captions 20 --repeat 1 --clients 1 --seconds 1 --workers 1 --database sb_statsbench_smoke
run "$PYTHON" bench/similarity.py --frames 4 --pairs 4 --batch 2
run "$PYTHON" bench/synthetic.py --pairs 2
PYTHONPATH=bench TEST_COSTS=var/bench-smoke/test-costs run "$PYTHON" -m pytest -q -p no:cacheprovider -p test_costs tests/benchmark/test_apportion.py
run "$PYTHON" bench/test_costs.py var/bench-smoke/test-costs --top 3
