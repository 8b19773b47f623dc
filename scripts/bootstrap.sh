#!/usr/bin/env bash
# Creates .venv with the Python of the competition's docker image (3.12) and the pinned
# requirements. Safe to rerun: an up-to-date .venv is reused.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  for candidate in python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

if ! python=$(find_python); then
  python=python3
  echo "warning: Python 3.12 (the docker image's version) not found; using $($python --version 2>&1)" >&2
fi

stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
"$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
echo "$want" > "$stamp"
echo "ready: $(.venv/bin/python --version) in .venv" >&2
