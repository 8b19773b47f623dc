#!/usr/bin/env bash
# Creates two virtual environments with the Python of the competition's docker image (3.12):
#   .venv        everything (builder, tests, reference generation)
#   .venv-image  only the docker image's packages: the shipped programs are run with it in
#                tests, which proves they need nothing the worker lacks.
# Safe to rerun: an environment whose requirements are unchanged is reused.
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

make_venv() {   # make_venv DIR REQUIREMENTS...
  local dir=$1; shift
  local stamp=$dir/.requirements.sha256 want
  want=$(cat "$@" | sha256sum | cut -d' ' -f1)
  if [ -x "$dir/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  "$python" -m venv "$dir"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$1"
  echo "$want" > "$stamp"
  echo "ready: $("$dir/bin/python" --version) in $dir" >&2
}

# The two environments are made side by side: pip spends most of its time on one core
# (unpacking and compiling), so on two cores a fresh setup takes 87 s instead of 121 s.
make_venv .venv requirements.txt requirements-image.txt &
full=$!
make_venv .venv-image requirements-image.txt
wait "$full"

# The ingestion tests run participant code as the unprivileged user 'nobody', as the
# program does inside the worker's container. There the interpreter lives in /usr/local;
# here it may sit under a private home (/root/.pyenv): grant traverse-only permission
# (o+x, no listing) on its ancestor folders so 'nobody' can start it.
if [ "$(id -u)" = 0 ]; then
  interpreter=$(readlink -f .venv-image/bin/python)
  dir=$(dirname "$interpreter")
  while [ "$dir" != / ]; do
    if [ "$(stat -c %A "$dir" | cut -c10)" != x ] && [ "$(stat -c %A "$dir" | cut -c10)" != t ]; then
      chmod o+x "$dir" && echo "bootstrap: made $dir traversable for the sandbox user" >&2
    fi
    dir=$(dirname "$dir")
  done
fi

# The browser tests (tests/test_pages_browser.py) render the pages in headless Chromium. Install
# Debian's package when it is missing and this machine allows it (root with apt-get); the check is
# one `command -v`, so reruns before every test run cost nothing. Without it those tests skip.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing chromium for the browser tests ..." >&2
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } >/dev/null 2>&1; then
      echo "warning: could not install chromium; the browser tests will be skipped" >&2
    fi
  else
    echo "warning: chromium not found and not installable here (needs root and apt-get); the browser tests will be skipped" >&2
  fi
fi
