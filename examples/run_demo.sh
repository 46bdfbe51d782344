#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine (run as root, or with sudo available):
# installs the Debian packages if any is missing, builds into build/, runs the C++
# quickstart and the fused-chain benchmark (`dynexpr-bench --filter tanh_chain`), then sets
# up the Python venv .venv/ (NumPy 2.x from PyPI, `pip install .` of this checkout) and
# runs the Python quickstart: capture, explain, fused vs unfused vs NumPy timings.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
JOBS=$(nproc 2>/dev/null || echo 2)

# Same package step as tests/run_all.sh: apt only when something is missing.
DEB_PACKAGES=(g++ meson ninja-build pkg-config make libhwy-dev libeigen3-dev libboost-dev
  doctest-dev python3 python3-dev python3-venv)
if command -v dpkg-query >/dev/null 2>&1; then
  missing=()
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$p")
  done
  if ((${#missing[@]})); then
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
    echo "run_demo: installing ${missing[*]}"
    "${sudo[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends \
      "${missing[@]}"
  fi
else
  echo "run_demo: not a Debian system; skipping package installation" \
    "(needs: ${DEB_PACKAGES[*]})"
fi

# Reconfigure an existing build/ so that sources added since it was set up are picked up
# (examples/cpp and bench are guarded by fs.exists, evaluated at configure time).
if [[ -d build/meson-private ]]; then
  meson setup --reconfigure build -Dpython=false
else
  meson setup build -Dpython=false
fi
# Only what the demo runs: the test suites are tests/run_all.sh's business.
targets=()
[[ -e examples/cpp/quickstart.cpp ]] && targets+=(quickstart)
[[ -e bench/dynexpr_bench.cpp ]] && targets+=(dynexpr-bench)
if ((${#targets[@]})); then
  meson compile -C build -j "$JOBS" "${targets[@]}"
fi

# run NAME SOURCE BINARY [ARGS...]: runs BINARY, or says why it cannot.
run() {
  local name=$1 src=$2 bin=$3
  shift 3
  if [[ -x $bin ]]; then
    echo
    echo "=== $name: $bin $*"
    "$bin" "$@"
  elif [[ -e $src ]]; then
    echo "run_demo: $src exists but $bin was not built" >&2
    exit 1
  else
    echo
    echo "=== $name: skipped ($src is not written yet)"
  fi
}

run "C++ quickstart" examples/cpp/quickstart.cpp build/examples/cpp/quickstart
run "benchmark" bench/dynexpr_bench.cpp build/bench/dynexpr-bench --filter tanh_chain

echo
echo "=== Python quickstart: .venv/bin/python examples/python/quickstart.py"
source tests/python_env.sh
py=$(python_for 3.11)
py=${py:-$(command -v python3)}
python_env .venv "$py"
.venv/bin/python examples/python/quickstart.py
