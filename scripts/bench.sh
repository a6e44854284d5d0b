#!/usr/bin/env bash
# `make bench`: the benchmark suite (bench/suite.py), writing bench/results/latest.{json,md}.
#
# Services: when DROVER_TEST_MYSQL_URL and DROVER_TEST_ZK_HOSTS are already in the environment
# (e.g. `set -a; . var/services/env; set +a` of services someone else runs), the suite uses them
# and starts and stops nothing. Otherwise it starts them with scripts/services.sh up (both Spark
# clusters) and stops what it started on exit, like scripts/test.sh.
#
#   BENCH_QUICK=1      the ~5 minute subset (1,000 jobs; no 10k/50k runs, no real failover)
#   BENCH_LOCK=PATH    flock PATH around each step (a machine shared with other heavy work)
#   BENCH_ONLY=a,b     only these steps (names: .venv/bin/python -m bench.suite --help)
#   BENCH_MERGE=1      update the existing results instead of starting them afresh
#   BENCH_OUT=DIR      write the results there instead of bench/results
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export LC_ALL=C
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 # every Ray port on 127.0.0.1 (RUNTIME-NOTES)
export SPARK_CLUSTERS=${SPARK_CLUSTERS:-2}  # cluster B: the real failover
export HADOOP_CLUSTERS=${HADOOP_CLUSTERS:-2} # YARN + HDFS clusters A and B (docs/yarn.md)

scripts/setup.sh

if [[ -n ${DROVER_TEST_MYSQL_URL:-} && -n ${DROVER_TEST_ZK_HOSTS:-} ]]; then
    echo "==> bench: using the services of the environment ($DROVER_TEST_MYSQL_URL, $DROVER_TEST_ZK_HOSTS)"
else
    stop_services() {
        local rc=$?
        echo "==> bench: stopping the services it started"
        scripts/services.sh down || rc=1
        exit "$rc"
    }
    trap stop_services EXIT
    echo "==> bench: starting the services (SPARK_CLUSTERS=$SPARK_CLUSTERS, HADOOP_CLUSTERS=$HADOOP_CLUSTERS)"
    scripts/services.sh up
    set -a
    # shellcheck source=/dev/null
    . var/services/env
    set +a
fi

ARGS=()
[[ ${BENCH_QUICK:-0} == 1 ]] && ARGS+=(--quick)
[[ -n ${BENCH_ONLY:-} ]] && ARGS+=(--only "$BENCH_ONLY")
[[ ${BENCH_MERGE:-0} == 1 ]] && ARGS+=(--merge)
[[ -n ${BENCH_OUT:-} ]] && ARGS+=(--out "$BENCH_OUT")
.venv/bin/python -m bench.suite "${ARGS[@]}"
