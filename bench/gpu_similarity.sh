#!/usr/bin/env bash
# GPU benchmark of the similarity worker's pipeline (bench/gpu_similarity.py): DINOv3 ViT-L/16 at 224 in bf16,
# end to end from JPEG files against the forward pass alone. One H200: about a minute.
# Needs python3 with torch (CUDA), transformers, Pillow, numpy, simplejpeg (requirements-gpu.txt); no Django,
# no network (carry the simplejpeg wheel to an offline GPU machine).
# BENCH_TINY=1 runs a tiny model on a few images on the CPU, to check the script itself.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "${PYTHON:-python3}" bench/gpu_similarity.py "$@"
