#!/usr/bin/env bash
# The linters: ruff's rules and formatter on the Python ([tool.ruff] in pyproject.toml), and
# clang-format on the C++ (.clang-format). Checks only; `tools/lint.sh --fix` rewrites instead.
# Versions: tools/lint-requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t cpp < <(git ls-files '*.cc' '*.h')
if [ "${1:-}" = --fix ]; then
  ruff check --fix .
  ruff format .
  clang-format -i "${cpp[@]}"
else
  ruff check .
  ruff format --check .
  clang-format --dry-run -Werror "${cpp[@]}"
fi
