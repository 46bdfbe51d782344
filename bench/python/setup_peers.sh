#!/usr/bin/env bash
# Installs the peers of bench/python/run_peers.py from PyPI into the project's venv, each
# on its own: one that fails is reported and the others still go in (run_peers shows a
# missing peer as "not installed"). NumPy is held at the venv's version, so that a peer
# wanting another NumPy fails to install instead of changing what dynexpr is tested with.
#
#   bash bench/python/setup_peers.sh                      # numexpr numba jax matplotlib torch
#   bash bench/python/setup_peers.sh numexpr matplotlib   # only these
#   PYTHON=/path/to/venv/bin/python bash bench/python/setup_peers.sh
#
# torch comes from its CPU wheel index when that answers; else from PyPI, whose Linux
# wheels bring the CUDA libraries (several GB).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
declare -A SPEC=([numexpr]=numexpr [numba]=numba [jax]="jax[cpu]" [matplotlib]=matplotlib
                 [torch]=torch)

if [[ ! -x $PY ]]; then
  echo "setup_peers: no Python at $PY; create the venv first (bash examples/run_demo.sh)" \
       "or name one with PYTHON=..." >&2
  exit 2
fi
peers=("$@")
[[ ${#peers[@]} -gt 0 ]] || peers=(numexpr numba jax matplotlib torch)

constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
"$PY" -c 'import numpy; print(f"numpy=={numpy.__version__}")' >"$constraints" 2>/dev/null ||
  : >"$constraints"

pip_install() {
  "$PY" -m pip install --disable-pip-version-check -q -c "$constraints" "$@"
}

reachable() {
  "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)" \
    "$1" >/dev/null 2>&1
}

installed=() failed=()
for peer in "${peers[@]}"; do
  if [[ -z ${SPEC[$peer]+set} ]]; then
    echo "setup_peers: unknown peer '$peer'; the peers are ${!SPEC[*]}" >&2
    failed+=("$peer")
    continue
  fi
  echo "setup_peers: installing ${SPEC[$peer]}"
  if [[ $peer == torch ]]; then
    if reachable "$TORCH_CPU_INDEX/torch/"; then
      if pip_install torch --index-url "$TORCH_CPU_INDEX"; then
        installed+=(torch)
        continue
      fi
      echo "setup_peers: torch from the CPU index failed; trying PyPI"
    else
      echo "setup_peers: $TORCH_CPU_INDEX does not answer; torch from PyPI (with CUDA libraries)"
    fi
  fi
  if pip_install "${SPEC[$peer]}"; then
    installed+=("$peer")
  else
    echo "setup_peers: FAILED to install ${SPEC[$peer]} (see pip's message above)" >&2
    failed+=("$peer")
  fi
done
echo "setup_peers: installed: ${installed[*]:-none}; failed: ${failed[*]:-none}"
