# Sourced by tests/run_all.sh and examples/run_demo.sh: the Python side's set-up.
#
#   python_for VERSION          prints the path of a CPython VERSION (e.g. 3.12), or nothing
#   python_env VENV PYTHON      creates VENV with PYTHON (if missing), installs NumPy 2.x,
#                               pytest, Hypothesis and the build tools from PyPI, then builds and installs
#                               dynexpr from this checkout (a regular, non-editable install:
#                               what the tests and the demo use is what `pip install .` gives)
#
# The build directory is build-py-<version>/ (git-ignored), so a second run reinstalls
# without rebuilding what did not change.

python_for() {
  local v=$1 cand
  for cand in "python$v" "$HOME/.pyenv/versions/$v"*/bin/"python$v" "/usr/local/bin/python$v" \
    "/usr/bin/python$v"; do
    if command -v "$cand" >/dev/null 2>&1 &&
      "$cand" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$v'.split('.'))))" \
        2>/dev/null; then
      command -v "$cand"
      return
    fi
  done
}

python_env() {
  local venv=$1 python=$2
  local ver
  ver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [[ ! -x $venv/bin/python ]]; then
    echo "python_env: creating $venv with $python ($ver)"
    "$python" -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet "numpy>=2" pytest pytest-xdist hypothesis tqdm \
    "dask[array]>=2024.1" "distributed>=2024.1" \
    "meson-python>=0.15" "meson>=1.1" ninja
  echo "python_env: installing dynexpr into $venv (build-py-$ver/)"
  # The venv's bin/ first on PATH: meson-python runs the `meson` it finds there (the
  # venv's, from PyPI), not an older system one.
  PATH="$PWD/$venv/bin:$PATH" "$venv/bin/python" -m pip install --quiet --no-build-isolation \
    --force-reinstall --no-deps -Cbuild-dir="build-py-$ver" .
}
