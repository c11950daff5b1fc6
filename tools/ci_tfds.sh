#!/usr/bin/env bash
# TFDS cross-check, for .ci/run: tfrec_fast.tfds against tensorflow-datasets itself.
#   - rebuilds the committed fixture (tests/data/tfds) with the pinned tensorflow-datasets and
#     checks it still matches (tests/test_tfds_peer.py), then compares what tfrec_fast.tfds
#     reads with tfds.as_numpy live (split strings, read configs, load, random access);
#   - runs tests/test_tfds.py there too, where simplejpeg makes JPEG pixels exact.
# In a virtualenv of its own (.venv-tfds, or $TFDS_VENV), so the main suite proves TensorFlow
# optional. A few minutes: most of it is installing TensorFlow (and building tfrec_fast, unless
# an earlier `pip install .` left its build directory).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TFDS_VENV:-.venv-tfds}

rm -rf "$VENV"
python3 -m venv "$VENV"
. "$VENV/bin/activate"
# tensorflow-datasets imports importlib_resources without declaring it.
pip install -q ".[tfds]" pytest hypothesis "tensorflow-cpu==2.21.0" \
  "tensorflow-datasets==4.9.10" importlib_resources
python -m pytest -p no:cacheprovider tests/test_tfds_peer.py tests/test_tfds.py
deactivate
