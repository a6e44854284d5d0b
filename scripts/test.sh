#!/usr/bin/env bash
# Everything `make test` checks: set up .venv, start the real services (stopped again on exit),
# then ruff, mypy, the import contract, the compose file and pytest. Each check runs even when an
# earlier one failed; the summary lists them all and the exit status is non-zero if any failed
# (pytest's exit 5, "no tests collected", counts as a failure). Extra arguments go to pytest:
#   scripts/test.sh tests/integration -x
# KEEP_SERVICES=1 leaves the services running afterwards (stop them with scripts/services.sh down).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export LC_ALL=C
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 # every Ray port on 127.0.0.1 (RUNTIME-NOTES)
export SPARK_CLUSTERS=${SPARK_CLUSTERS:-2}  # cluster B: two-cluster tests
export HADOOP_CLUSTERS=${HADOOP_CLUSTERS:-2} # YARN + HDFS clusters A and B (docs/yarn.md)
# the packages that exist (bench/ and friends may not, e.g. in a fresh clone before anything is in them)
LINT_PATHS=()
for path in scheduler api drover harness tests pipelines migrations bench chaos scripts; do
    [[ -e $path ]] && LINT_PATHS+=("$path")
done

banner() { printf '\n==> %s\n' "$*"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }'; }

STEPS=()
RESULTS=()
FAILED=0
# record NAME T0 RC : remember how a check went (its time since T0, its exit status RC)
record() {
    local name=$1 t0=$2 rc=$3
    STEPS+=("$name")
    if ((rc == 0)); then
        RESULTS+=("ok      $(since "$t0")")
    else
        local why=""
        if [[ $name == pytest* && $rc == 5 ]]; then why=" (no tests collected)"; fi
        RESULTS+=("FAILED  $(since "$t0")  exit $rc$why")
        FAILED=1
    fi
}

# step NAME CMD... : run a check, remember how it went, never stop the script.
step() {
    local name=$1 t0=$EPOCHREALTIME rc=0
    shift
    banner "$name: $*"
    "$@" || rc=$?
    record "$name" "$t0" "$rc"
}

# step_behind NAME LOG CMD... : start a check in the background at the lowest CPU and I/O
# priority, its output in LOG; step_behind_end waits for it, prints LOG and records it.
BEHIND_PID=
step_behind() {
    BEHIND_NAME=$1 BEHIND_LOG=$2 BEHIND_T0=$EPOCHREALTIME
    shift 2
    banner "$BEHIND_NAME (beside what follows, at nice 19; output in $BEHIND_LOG): $*"
    (
        renice -n 19 -p "$BASHPID" >/dev/null
        ionice -c 3 -p "$BASHPID" 2>/dev/null || true # the idle I/O class, where it exists
        "$@"
    ) >"$BEHIND_LOG" 2>&1 &
    BEHIND_PID=$!
}
step_behind_end() {
    local rc=0
    wait "$BEHIND_PID" || rc=$?
    BEHIND_PID=
    banner "$BEHIND_NAME: its output (from $BEHIND_LOG)"
    cat "$BEHIND_LOG"
    record "$BEHIND_NAME" "$BEHIND_T0" "$rc"
}

stop_services() {
    local rc=$?
    if [[ -n $BEHIND_PID ]]; then # interrupted: the background part goes first (its own group)
        kill -TERM -- "-$BEHIND_PID" 2>/dev/null || true
        wait "$BEHIND_PID" 2>/dev/null || true
    fi
    # a start under way ends first, so that what it started is stopped too
    [[ -n ${SERVICES_PID:-} ]] && { wait "$SERVICES_PID" 2>/dev/null || true; }
    if [[ ${KEEP_SERVICES:-0} == 1 ]]; then
        banner "services left running (KEEP_SERVICES=1); stop them with scripts/services.sh down"
    else
        banner "stopping services"
        scripts/services.sh down || rc=1
    fi
    exit "$rc"
}

# ensure_tool CMD PACKAGE WHY: install Debian's PACKAGE (--no-install-recommends) when CMD is
# missing; the tests that need CMD fail (never skip) when it still is
ensure_tool() {
    local cmd=$1 package=$2 why=$3
    command -v "$cmd" >/dev/null && return 0
    [[ $EUID -eq 0 ]] || { echo "$cmd is missing (apt-get install $package)" >&2; return 1; }
    echo "installing $cmd (Debian's $package package; $why)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" \
        >/dev/null 2>&1 || {
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" \
                >/dev/null
    } || { echo "could not install $package" >&2; return 1; }
}

compose_config() {
    ensure_tool docker-compose docker-compose "only to validate docker-compose.yml; no Docker engine needed" &&
        docker-compose -f docker-compose.yml config -q
}

run_pytest() {
    set -a
    # shellcheck source=/dev/null
    . var/services/env
    set +a
    .venv/bin/pytest -q -ra --tb=short --durations=25 "$@"
}

# module_times REPORT: seconds per module of one part, the longest first (what the heavy(minutes)
# marks are set from); never fails the run
module_times() {
    [[ -f $1 ]] && .venv/bin/python scripts/test_times.py "$1" --top 12 || true
}

# The suite in two parts at once. The end-to-end tests and the serial ones (real Spark jobs,
# rates and timeouts measured in time) run on DROVER_SERIAL_WORKERS workers, a whole module to a
# worker, the heaviest modules first; the modules that share a service keep apart by names of
# their own (databases, ZooKeeper namespaces, job names, folders). Most of their time is spent
# waiting (JVMs starting, leases and sessions lapsing), so the rest of the suite, which is not
# timing-sensitive (pytest-xdist, a module to a worker so its module fixtures are made once),
# runs beside them at nice 19 in the idle I/O class: it takes the cores they leave idle and
# gives way when they need them. DROVER_TEST_OVERLAP=0 runs the two parts one after the other,
# the rest of the suite first. Each part must collect tests (pytest's exit 5 fails the step).
# Seconds per module go to var/test-reports/ (JUnit XML) and are summed at the end.
PARALLEL_MARKS="not e2e and not serial"
SERIAL_MARKS="e2e or serial"
WORKERS=${DROVER_TEST_WORKERS:-2}
SERIAL_WORKERS=${DROVER_SERIAL_WORKERS:-2}

T0=$EPOCHREALTIME
banner "setup"
scripts/setup.sh
trap stop_services EXIT
# the tools only some checks use, first: apt-get must not run beside services.sh's own installs
# promtool validates docs/prometheus/ (installed, never started: no systemd here); node checks
# that the console's ES modules parse (tests/unit/test_prometheus_docs.py, test_console_assets.py)
ensure_tool promtool prometheus "only to validate docs/prometheus/" || true
ensure_tool node nodejs "only to check the console's JavaScript modules parse" || true
ensure_tool docker-compose docker-compose "only to validate docker-compose.yml; no Docker engine needed" ||
    true
# the services start (JVMs, mostly waiting) while the static checks run; their output after them
banner "services (SPARK_CLUSTERS=$SPARK_CLUSTERS, HADOOP_CLUSTERS=$HADOOP_CLUSTERS) start"
mkdir -p var/test-reports
scripts/services.sh up >var/test-reports/services-up.log 2>&1 &
SERVICES_PID=$!
step ruff .venv/bin/ruff check "${LINT_PATHS[@]}"
step mypy .venv/bin/mypy
# the scheduler's layers and no import circle ([tool.importlinter] in pyproject.toml)
step imports .venv/bin/lint-imports --no-logo
step compose compose_config
banner "services: their output (from var/test-reports/services-up.log)"
services_rc=0
wait "$SERVICES_PID" || services_rc=$?
SERVICES_PID=
cat var/test-reports/services-up.log
((services_rc == 0)) || { echo "services did not come up (exit $services_rc)" >&2; exit "$services_rc"; }
if (($# > 0)); then # the tests named on the command line, as they are
    step pytest run_pytest "$@"
else
    parallel=(run_pytest -n "$WORKERS" --dist loadscope -m "$PARALLEL_MARKS"
        --junitxml=var/test-reports/parallel.xml)
    # --no-loadscope-reorder: the heaviest first (tests/conftest.py), not the most tests first
    serial=(run_pytest -n "$SERIAL_WORKERS" --dist loadfile --no-loadscope-reorder
        -m "$SERIAL_MARKS" --junitxml=var/test-reports/serial.xml)
    if [[ ${DROVER_TEST_OVERLAP:-1} == 1 ]]; then
        set -m # the background part in a process group of its own (stopped as one on exit)
        step_behind pytest-parallel var/test-reports/parallel.log "${parallel[@]}"
        set +m
        step pytest-serial "${serial[@]}"
        step_behind_end
    else
        step pytest-parallel "${parallel[@]}"
        step pytest-serial "${serial[@]}"
    fi
    banner "seconds per module, serial part"
    module_times var/test-reports/serial.xml
fi

banner "summary ($(since "$T0") in all)"
for i in "${!STEPS[@]}"; do printf '  %-8s %s\n' "${STEPS[$i]}" "${RESULTS[$i]}"; done
if ((FAILED)); then
    echo "  => FAILED"
    exit 1
fi
echo "  => all checks passed"
