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
# step NAME CMD... : run a check, remember how it went, never stop the script.
step() {
    local name=$1 t0=$EPOCHREALTIME rc=0
    shift
    banner "$name: $*"
    "$@" || rc=$?
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

stop_services() {
    local rc=$?
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

# The suite in two parts, one after the other: what is not timing-sensitive on both cores at once
# (pytest-xdist; a module stays on one worker, so its module fixtures are made once), then the
# end-to-end tests and the serial ones (real Spark jobs, rates and timeouts measured in time),
# a whole module to a worker on DROVER_SERIAL_WORKERS workers, the heaviest modules first: most
# of their time is spent waiting (JVMs starting, leases and sessions lapsing), and the modules
# that share a service keep apart by names of their own (databases, ZooKeeper namespaces, job
# names, folders). Each part must collect tests (pytest's exit 5 fails the step).
PARALLEL_MARKS="not e2e and not serial"
SERIAL_MARKS="e2e or serial"
WORKERS=${DROVER_TEST_WORKERS:-2}
SERIAL_WORKERS=${DROVER_SERIAL_WORKERS:-2}

T0=$EPOCHREALTIME
banner "setup"
scripts/setup.sh
trap stop_services EXIT
banner "services (SPARK_CLUSTERS=$SPARK_CLUSTERS, HADOOP_CLUSTERS=$HADOOP_CLUSTERS)"
scripts/services.sh up

# promtool validates docs/prometheus/ (installed, never started: no systemd here); node checks
# that the console's ES modules parse (tests/unit/test_prometheus_docs.py, test_console_assets.py)
ensure_tool promtool prometheus "only to validate docs/prometheus/" || true
ensure_tool node nodejs "only to check the console's JavaScript modules parse" || true
step ruff .venv/bin/ruff check "${LINT_PATHS[@]}"
step mypy .venv/bin/mypy
# the scheduler's layers and no import circle ([tool.importlinter] in pyproject.toml)
step imports .venv/bin/lint-imports --no-logo
step compose compose_config
if (($# > 0)); then # the tests named on the command line, as they are
    step pytest run_pytest "$@"
else
    step pytest-parallel run_pytest -n "$WORKERS" --dist loadscope -m "$PARALLEL_MARKS"
    # --no-loadscope-reorder: the heaviest first (tests/conftest.py), not the most tests first
    step pytest-serial run_pytest -n "$SERIAL_WORKERS" --dist loadfile --no-loadscope-reorder \
        -m "$SERIAL_MARKS"
fi

banner "summary ($(since "$T0") in all)"
for i in "${!STEPS[@]}"; do printf '  %-8s %s\n' "${STEPS[$i]}" "${RESULTS[$i]}"; done
if ((FAILED)); then
    echo "  => FAILED"
    exit 1
fi
echo "  => all checks passed"
