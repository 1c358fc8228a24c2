#!/usr/bin/env bash
# GPU benchmark of the similarity path through Django (bench/gpu_worker.py): embedded PostgreSQL and Redis, a
# random DINOv3 ViT-L/16 at 224 activated with `check_dinov3 --activate --device cuda`, sampled videos, a real
# Celery similarity worker (--pool solo, CUDA, bf16); prints its images/s beside bench/gpu_similarity.sh's
# end-to-end figure, run in the same script (target: at least 90% of it). One H200: a few minutes.
# Needs requirements-dev.txt (the app, torch with CUDA, transformers, simplejpeg, the embedded PostgreSQL and
# Redis): the project's .venv (`make install`) when there is one, else PYTHON or python3; no network.
# BENCH_TINY=1 runs a tiny model on a handful of frames on the CPU, to check the script itself.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; fi
exec "${PYTHON:-python3}" bench/gpu_worker.py "$@"
