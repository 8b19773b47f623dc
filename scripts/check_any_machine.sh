#!/usr/bin/env bash
# The README's test command as another machine would run it (issue 49, item 3):
#
#   scripts/check_any_machine.sh --mode dispatch [pytest arguments]
#   scripts/check_any_machine.sh --mode load kinds/bdl2021/tests/test_bdl_more_baselines.py -n 2
#   scripts/check_any_machine.sh --mode both -k bdl
#
# dispatch: numpy's runtime CPU dispatch narrowed (NPY_DISABLE_CPU_FEATURES names the AVX512
#   family and AVX2/FMA3, as numpy on this machine knows them) and OpenBLAS on an older core
#   type (OPENBLAS_CORETYPE, default Sandybridge: AVX without FMA; CHECK_OPENBLAS_CORETYPE
#   changes it). Floats then round as on another CPU: a test that compares recomputed floats
#   bit for bit with committed ones fails here.
# load: beside a CPU hog that keeps every core busy twice over (2 x nproc busy loops, started
#   here and always stopped on exit): a test that asserts what wall time bought fails here.
# both: the two runs, one after the other; the exit status is the first failure's.
#
# Both settings are checked before the tests run: numpy must report every named feature off,
# and OpenBLAS must report the core type asked for (it falls back silently on a name it does
# not know).
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=.venv/bin/python
CORETYPE="${CHECK_OPENBLAS_CORETYPE:-Sandybridge}"

usage() {
    echo "usage: $0 --mode dispatch|load|both [pytest arguments]" >&2
    exit 2
}

[[ $# -ge 2 && $1 == --mode ]] || usage
mode=$2
shift 2
[[ $mode == dispatch || $mode == load || $mode == both ]] || usage

# The features to turn off: those numpy dispatches to, of the AVX512 family, AVX2 and FMA3.
narrowed_features() {
    "$PYTHON" - <<'EOF'
try:
    from numpy._core._multiarray_umath import __cpu_dispatch__
except ImportError:                     # numpy 1.x
    from numpy.core._multiarray_umath import __cpu_dispatch__
print(" ".join(f for f in __cpu_dispatch__ if f.startswith("AVX512") or f in ("AVX2", "FMA3")))
EOF
}

# Fails unless numpy reports every feature of $NPY_DISABLE_CPU_FEATURES off and OpenBLAS runs
# the core type asked for.
check_dispatch_settings() {
    "$PYTHON" - "$CORETYPE" <<'EOF'
import os
import sys

import threadpoolctl
try:
    from numpy._core._multiarray_umath import __cpu_features__
except ImportError:
    from numpy.core._multiarray_umath import __cpu_features__
named = os.environ["NPY_DISABLE_CPU_FEATURES"].split()
still_on = [name for name in named if __cpu_features__.get(name)]
unknown = [name for name in named if name not in __cpu_features__]
cores = [pool.get("architecture") for pool in threadpoolctl.threadpool_info()
         if pool.get("internal_api") == "openblas"]
problems = ([f"numpy does not know {unknown}"] if unknown else []) + (
    [f"numpy still uses {still_on}"] if still_on else []) + (
    [f"OpenBLAS runs {cores}, not {sys.argv[1]}"]
    if not cores or any(core.lower() != sys.argv[1].lower() for core in cores) else [])
if problems:
    sys.exit("check_any_machine: " + "; ".join(problems))
on = [name for name, enabled in __cpu_features__.items() if enabled]
print(f"dispatch: numpy off {named}, on {on}; OpenBLAS core {cores[0]}")
EOF
}

run_dispatch() {
    NPY_DISABLE_CPU_FEATURES="$(narrowed_features)"
    export NPY_DISABLE_CPU_FEATURES OPENBLAS_CORETYPE="$CORETYPE"
    check_dispatch_settings || return 2
    local status=0
    "$PYTHON" -m pytest "$@" || status=$?
    unset NPY_DISABLE_CPU_FEATURES OPENBLAS_CORETYPE
    return "$status"
}

HOG_PIDS=()

stop_hog() {
    if ((${#HOG_PIDS[@]})); then
        kill "${HOG_PIDS[@]}" 2>/dev/null || true
        wait "${HOG_PIDS[@]}" 2>/dev/null || true
        HOG_PIDS=()
    fi
}
trap stop_hog EXIT
trap 'exit 130' INT TERM

run_load() {
    local loops=$((2 * $(nproc)))
    for _ in $(seq "$loops"); do
        (while :; do :; done) &
        HOG_PIDS+=($!)
    done
    echo "load: $loops busy loops on $(nproc) cores (pids ${HOG_PIDS[*]})"
    local status=0
    "$PYTHON" -m pytest "$@" || status=$?
    stop_hog
    return "$status"
}

status=0
case $mode in
    dispatch) run_dispatch "$@" || status=$? ;;
    load) run_load "$@" || status=$? ;;
    both)
        run_dispatch "$@" || status=$?
        load_status=0
        run_load "$@" || load_status=$?
        ((status)) || status=$load_status
        ;;
esac
exit "$status"
