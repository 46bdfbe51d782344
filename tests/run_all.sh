#!/usr/bin/env bash
# All tests, from a fresh Debian 12 machine (run as root, or with sudo available):
#   1. installs the Debian packages the build needs, if any is missing;
#   2. build/      : release build with -Dwerror=true, then `meson test`;
#      build-cross/: the same sources compiled (not run) with werror for the other ISA level
#                    (AVX2 on an AVX-512 host, AVX-512 elsewhere);
#   3. build-asan/ : AddressSanitizer + UndefinedBehaviorSanitizer build (-O0 -g): the core,
#                    thread-pool and SIMD-math suites; with --full, every suite (CI time:
#                    see the note at step 3);
#   4. consumers   : installs into build-install/prefix, then builds and runs
#                    tests/consumer/main.cpp through `pkg-config --cflags dynexpr` (make),
#                    and as a Meson parent project via pkg-config and via a subproject.
#   5. Python      : venv .venv/ (CPython 3.11), .venv-3.12/ and .venv-3.13/, NumPy 2.x from PyPI,
#                    `pip install .` of this checkout, then pytest tests/python on each
#                    (kernels compile into build-kernel-cache/, shared by the runs); the
#                    modules marked one_python run on the first version only.
#   6. export      : examples/cpp/export_example.py exports a NumPy function as C++
#                    (dynexpr.export); build/ is reconfigured with -Dexported and
#                    examples/cpp/use_exported is built and run against NumPy's results.
# Exits non-zero on any failure; the last line is "N passed, N failed" (meson tests of
# both configurations, the consumer checks and the pytest cases; a Python version that is
# not on the machine is reported as skipped, never as passed).
set -euo pipefail

FULL=0
for arg in "$@"; do
  case $arg in
    --full) FULL=1 ;;
    -h | --help)
      sed -n '2,20p' "$0"
      exit 0
      ;;
    *)
      echo "run_all: unknown argument $arg (use --full for every suite under sanitizers)" >&2
      exit 2
      ;;
  esac
done

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
JOBS=$(nproc 2>/dev/null || echo 2)
START=$SECONDS

log() { printf '\n=== [%4ds] %s\n' "$((SECONDS - START))" "$*"; }

# ---------------------------------------------------------------------------------------
# 1. Debian packages (apt only when something is missing, so repeated runs are fast).
# ---------------------------------------------------------------------------------------
DEB_PACKAGES=(g++ meson ninja-build pkg-config make libhwy-dev libeigen3-dev libboost-dev
  doctest-dev python3 python3-dev python3-venv)

install_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "run_all: not a Debian system; skipping package installation" \
      "(needs: ${DEB_PACKAGES[*]})"
    return
  fi
  local missing=() p
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    echo "run_all: Debian packages already installed"
    return
  fi
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
  echo "run_all: installing ${missing[*]}"
  "${sudo[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends \
    "${missing[@]}"
}

# ---------------------------------------------------------------------------------------
# Bookkeeping for the summary, printed however the script ends.
# ---------------------------------------------------------------------------------------
TESTLOGS=()         # meson testlog.json files of the configurations whose tests ran
JUNIT=()            # pytest junit-xml files
PY_SKIPPED=()       # Python versions whose tests could not run (not installed)
EXTRA_PASSED=0      # consumer checks
EXTRA_FAILED=0
STATUS=0            # set to 1 by a failed test stage; later stages still run
STAGE="start"

PARENT=""          # scratch Meson parent project (step 4), removed at exit

summary() {
  local rc=$?
  set +e
  [[ -n $PARENT ]] && rm -rf "$PARENT"
  local counts
  counts=$(python3 - "${TESTLOGS[@]}" "${JUNIT[@]}" <<'EOF'
import json, sys
import xml.etree.ElementTree as ET
passed = failed = skipped = 0
details = []
for path in sys.argv[1:]:
    p = f = s = 0
    if path.endswith(".xml"):  # pytest --junitxml
        try:
            for suite in ET.parse(path).getroot().iter("testsuite"):
                n, bad = int(suite.get("tests", 0)), int(suite.get("failures", 0)) + int(suite.get("errors", 0))
                sk = int(suite.get("skipped", 0))
                p, f, s = p + n - bad - sk, f + bad, s + sk
        except (OSError, ET.ParseError):
            f += 1
        details.append(f"pytest {path.split('/')[-1][:-4]}: {p} passed, {f} failed, {s} skipped")
        passed, failed, skipped = passed + p, failed + f, skipped + s
        continue
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                result = json.loads(line).get("result", "")
                if result in ("OK", "EXPECTEDFAIL"):
                    p += 1
                elif result == "SKIP":
                    s += 1
                else:  # FAIL, TIMEOUT, UNEXPECTEDPASS, ERROR, INTERRUPT
                    f += 1
    except OSError:
        f += 1
    details.append(f"{path.split('/')[-3]}: {p} passed, {f} failed, {s} skipped")
    passed, failed, skipped = passed + p, failed + f, skipped + s
print(passed, failed, skipped, "; ".join(details) or "no meson tests ran")
EOF
  )
  local passed failed skipped details
  read -r passed failed skipped details <<<"$counts"
  passed=${passed:-0} failed=${failed:-1} skipped=${skipped:-0}
  skipped=$((skipped + ${#PY_SKIPPED[@]}))
  passed=$((passed + EXTRA_PASSED))
  failed=$((failed + EXTRA_FAILED))
  if ((rc != 0 && STATUS == 0)); then
    echo "run_all: stopped at stage '$STAGE' (exit status $rc)" >&2
    failed=$((failed + 1))
  fi
  echo
  echo "run_all: ${details}; consumers: ${EXTRA_PASSED} passed, ${EXTRA_FAILED} failed" \
    "(${skipped} skipped; $((SECONDS - START))s)"
  echo "${passed} passed, ${failed} failed"
  if ((rc == 0 && STATUS != 0)); then exit 1; fi
  exit "$rc"
}
trap summary EXIT

# A test stage (builddir, extra `meson test` arguments): its failure is recorded, and the
# next stages still run.
run_tests() {
  local builddir=$1
  shift
  TESTLOGS+=("$ROOT/$builddir/meson-logs/testlog.json")
  if ! meson test -C "$builddir" --print-errorlogs --num-processes "$JOBS" "$@"; then
    echo "run_all: tests failed in $builddir" >&2
    STATUS=1
  fi
}

# A consumer check: counted as one passed or failed check.
check() {
  local name=$1
  shift
  if "$@"; then
    EXTRA_PASSED=$((EXTRA_PASSED + 1))
  else
    echo "run_all: consumer check failed: $name" >&2
    EXTRA_FAILED=$((EXTRA_FAILED + 1))
    STATUS=1
  fi
}

STAGE="install packages"
log "Debian packages"
install_packages

# ---------------------------------------------------------------------------------------
# 2. Release build, warnings are errors.
# ---------------------------------------------------------------------------------------
STAGE="build"
log "configure + build: build/ (werror)"
rm -rf build
meson setup build -Dwerror=true -Dpython=false
meson compile -C build -j "$JOBS"
STAGE="test build"
log "test: build/"
run_tests build

# ---------------------------------------------------------------------------------------
# 2b. The other ISA level, compile only (nothing runs: the host may lack it). GCC's warnings
#     depend on the target (Eigen's AVX-512 kernels warn where its AVX2 ones do not), so a
#     werror build that passes on this host must also pass where CI's next machine differs:
#     on an AVX-512 host the check compiles for AVX2 (skylake; haswell lacks AES), elsewhere
#     for AVX-512 (skylake-avx512). meson.build checks that Highway targets that level.
# ---------------------------------------------------------------------------------------
STAGE="build-cross"
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then CROSS_MARCH=skylake; else CROSS_MARCH=skylake-avx512; fi
log "configure + compile only: build-cross/ (werror, -march=$CROSS_MARCH)"
rm -rf build-cross
meson setup build-cross -Dwerror=true -Dpython=false -Dmarch="$CROSS_MARCH"
meson compile -C build-cross -j "$JOBS"
echo "run_all: every C++ test, example and benchmark compiled with werror for -march=$CROSS_MARCH"
EXTRA_PASSED=$((EXTRA_PASSED + 1))

# ---------------------------------------------------------------------------------------
# 3. Sanitizers, at -O0 -g (buildtype=debug, asserts on). Compile time decides the
#    level: g++ 12 with -fsanitize=address,undefined is several times slower at -Og/-O2
#    than at -O0 on these template-heavy files (measured, CPU seconds: test_eigen.cpp
#    104 s at -O0, 311 s at -Og; test_core_shape.cpp 9 s at -O0, 17 s at -Og, 47 s at
#    -O2), and the sanitizer checks do not depend on the optimisation level.
#    Not werror: sanitizer builds raise flow-analysis warnings (maybe-uninitialized,
#    stringop-*) that the release build does not; the release build is the warnings gate.
#    Examples and benchmarks are not tests, so they are not rebuilt here.
#    CI time decides the set: sanitizers triple compile time (test_eval.cpp: 64 s CPU at
#    -O0, 184 s with address,undefined), and every suite under them costs ~25 CPU-minutes,
#    more than CI's 20-minute budget on a 2-core machine together with the rest. CI runs
#    the suites whose bugs a sanitizer finds best (shapes and views arithmetic, the pool's
#    threads, the SIMD math's memory accesses); `tests/run_all.sh --full` runs them all.
# ---------------------------------------------------------------------------------------
STAGE="build-asan"
log "configure + build: build-asan/ (address,undefined)"
rm -rf build-asan
meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
  -Dbuildtype=debug -Dexamples=false -Dbench=false -Dpython=false
ASAN_SUITES=(test_core_shape test_thread_pool test_simd_math)
if ((FULL)); then
  meson compile -C build-asan -j "$JOBS"
else
  meson compile -C build-asan -j "$JOBS" "${ASAN_SUITES[@]/#/tests/cpp/}"
fi
STAGE="test build-asan"
log "test: build-asan/"
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
# The compile-fail checks ran in build/; compiling them again with sanitizer flags would
# give the same diagnostics.
if ((FULL)); then
  run_tests build-asan --no-suite compile_fail
else
  echo "run_all: sanitizers on ${ASAN_SUITES[*]} (tests/run_all.sh --full: every suite)"
  run_tests build-asan --no-rebuild "${ASAN_SUITES[@]}"
fi
unset ASAN_OPTIONS UBSAN_OPTIONS

# ---------------------------------------------------------------------------------------
# 4. Consumers of the installed library and of the subproject.
# ---------------------------------------------------------------------------------------
STAGE="install"
log "install into build-install/prefix"
rm -rf build-install
PREFIX=$ROOT/build-install/prefix
meson setup build-install/build --prefix="$PREFIX" -Dtests=false -Dexamples=false -Dpython=false \
  -Dbench=false
meson install -C build-install/build --quiet
PC_FILE=$(find "$PREFIX" -name dynexpr.pc -print -quit)
if [[ -z $PC_FILE ]]; then
  echo "run_all: meson install did not produce dynexpr.pc" >&2
  exit 1
fi
PC_DIR=$(dirname "$PC_FILE")
echo "run_all: $PC_FILE:"
sed 's/^/    /' "$PC_FILE"

STAGE="consumers"
log "consumer: make + pkg-config"
consumer_make() {
  PKG_CONFIG_PATH="$PC_DIR" make -C tests/consumer --no-print-directory \
    O="$ROOT/build-install" run
}
check "pkg-config (make)" consumer_make

# The Meson parent project runs from a scratch copy outside the repository, so that its
# subprojects/dynexpr can point back at this checkout.
PARENT=$(mktemp -d "${TMPDIR:-/tmp}/dynexpr-parent.XXXXXX")
cp tests/consumer/meson.build tests/consumer/main.cpp "$PARENT/"
mkdir -p "$PARENT/subprojects"
ln -s "$ROOT" "$PARENT/subprojects/dynexpr"

log "consumer: meson dependency('dynexpr') via pkg-config"
consumer_meson_pkgconfig() {
  PKG_CONFIG_PATH="$PC_DIR" meson setup "$PARENT/build-pc" "$PARENT" --wrap-mode=nofallback &&
    meson compile -C "$PARENT/build-pc" &&
    "$PARENT/build-pc/consumer"
}
check "meson parent (pkg-config)" consumer_meson_pkgconfig

log "consumer: meson dependency('dynexpr') via subproject"
consumer_meson_subproject() {
  meson setup "$PARENT/build-sub" "$PARENT" --force-fallback-for=dynexpr &&
    meson compile -C "$PARENT/build-sub" &&
    "$PARENT/build-sub/consumer"
}
check "meson parent (subproject)" consumer_meson_subproject

# ---------------------------------------------------------------------------------------
# 5. Python: the bridge on CPython 3.11 (.venv/), 3.12 (.venv-3.12/) and 3.13 (.venv-3.13/).
# ---------------------------------------------------------------------------------------
source tests/python_env.sh
export DYNEXPR_CACHE_DIR=$ROOT/build-kernel-cache  # cold for this checkout, shared by all three
rm -rf "$DYNEXPR_CACHE_DIR"
PY_FIRST_DONE=0
PY_FIRST_DONE_VER=""
for ver in 3.11 3.12 3.13; do
  STAGE="python $ver"
  py=$(python_for "$ver")
  if [[ -z $py ]]; then
    echo "run_all: SKIPPED the Python $ver tests: no python$ver on this machine" >&2
    PY_SKIPPED+=("$ver")
    continue
  fi
  venv=.venv
  [[ $ver == 3.11 ]] || venv=.venv-$ver
  log "python $ver: $venv (pip install .)"
  python_env "$venv" "$py"
  log "python $ver: pytest tests/python"
  JUNIT+=("$ROOT/build-kernel-cache/pytest-$ver.xml")
  # The first version runs every test; the others leave out the modules marked
  # one_python (compiler, cache files, generated C++/CUDA text: nothing there depends on
  # the interpreter), which saves about 7 minutes of CI. They are deselected, so the
  # summary counts them once, as run.
  select=()
  if ((PY_FIRST_DONE)); then
    select=(-m "not one_python")
    echo "run_all: Python $ver: the one_python modules ran on Python $PY_FIRST_DONE_VER"
  fi
  # -n: pytest-xdist workers (kernels compile in parallel; the cache is safe to share).
  if ! "$venv/bin/python" -m pytest tests/python -q -n "$JOBS" -p no:cacheprovider \
    "${select[@]}" --junitxml="$ROOT/build-kernel-cache/pytest-$ver.xml"; then
    echo "run_all: Python $ver tests failed" >&2
    STATUS=1
  fi
  PY_FIRST_DONE=1
  PY_FIRST_DONE_VER=${PY_FIRST_DONE_VER:-$ver}
done
if ((${#PY_SKIPPED[@]})); then
  echo "run_all: Python versions not tested (not installed): ${PY_SKIPPED[*]}" >&2
fi

# ---------------------------------------------------------------------------------------
# 6. A NumPy function exported as standalone C++ (dynexpr.export, in .venv/), then
#    examples/cpp/use_exported built by Meson in build/ against it and run: it checks the
#    library's results against NumPy's.
# ---------------------------------------------------------------------------------------
STAGE="exported example"
log "export: examples/cpp/export_example.py, then build/examples/cpp/use_exported"
EXPORTED=$ROOT/build/exported
exported_example() {
  rm -rf "$EXPORTED" &&
    .venv/bin/python examples/cpp/export_example.py "$EXPORTED" &&
    meson setup --reconfigure build -Dexported="$EXPORTED" >/dev/null &&
    meson compile -C build examples/cpp/use_exported &&
    build/examples/cpp/use_exported "$EXPORTED"
}
check "exported C++ example (use_exported)" exported_example

STAGE="done"
log "finished"
