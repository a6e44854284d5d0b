#!/usr/bin/env bash
# The real services the test suite needs, on 127.0.0.1 only.
#
#   scripts/services.sh up      install what is missing, start what is not running, wait until
#                               every service answers, write var/services/env
#   scripts/services.sh down    stop only what `up` started (by PID, from var/services/*.pid)
#   scripts/services.sh status  what runs, who started it, whether it answers (exit 1 if not all)
#   scripts/services.sh up|down|status hadoop
#                               the same for the YARN + HDFS test clusters alone (HADOOP_CLUSTERS
#                               of them, 2 if unset): start or stop them beside services someone
#                               else runs; their lines in var/services/env are replaced
#   scripts/services.sh install install what is missing (Java, ZooKeeper, MariaDB), start nothing:
#                               for runs that start private servers of their own (make chaos)
#   scripts/services.sh browser install Debian's chromium if it is missing (the console's browser
#                               tests drive it headless; `up` does this too). Never a downloaded
#                               browser build: Playwright drives /usr/bin/chromium
#
# Services: MariaDB (127.0.0.1:3306, root without password; an already running server is used
# and never stopped), ZooKeeper (private instance, 127.0.0.1:21810), Spark standalone cluster "a"
# (master 7077, UI 8080, REST 6066, worker UI 8081) and, with SPARK_CLUSTERS=2, cluster "b"
# (master 7078, UI 8082, REST 6067, worker UI 8083). With HADOOP_CLUSTERS=1 or 2, YARN + HDFS
# test clusters "a" (ports 9100-9113) and "b" (9130-9143): scripts/hadoop/services.sh, docs/yarn.md.
#
# Environment:
#   SPARK_CLUSTERS            1 or 2 (default 1)
#   HADOOP_CLUSTERS           0, 1 or 2 YARN + HDFS clusters (default 0; scripts/test.sh: 2)
#   DROVER_SVC_DEADLINE       seconds each service may take to answer (default 90)
#   DROVER_SVC_MYSQL_PORT     MariaDB port (default 3306)
#   DROVER_SVC_MYSQL_DATADIR  unset: the system MariaDB (/var/lib/mysql, started as user mysql if
#                             it is not running); set: a private instance with that data directory
#   DROVER_SVC_ZK_PORT        ZooKeeper client port (default 21810)
#   DROVER_SVC_JVM_OPTS       JVM options for ZooKeeper and the Spark daemons (default: options
#                             that start them faster; set it empty for the JVM's defaults)
#   DROVER_SVC_APP_JVM_OPTS   JVM options of the drivers and executors the test workers launch
#                             (JAVA_TOOL_OPTIONS) and spark-submit starts (spark-defaults.conf in
#                             var/services/spark-conf); default: DROVER_SVC_JVM_OPTS
#
# State, pid files and logs live under var/services/ (gitignored). Source var/services/env with
# `set -a; . var/services/env; set +a` to run pytest by hand.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=$ROOT/var/services
LOGS=$STATE/logs
PY=$ROOT/.venv/bin/python
PROBE=$ROOT/scripts/probe.py
HOST=127.0.0.1
SPARK_CLUSTERS=${SPARK_CLUSTERS:-1}
DEADLINE=${DROVER_SVC_DEADLINE:-90}
MYSQL_PORT=${DROVER_SVC_MYSQL_PORT:-3306}
MYSQL_DATADIR=${DROVER_SVC_MYSQL_DATADIR:-}
ZK_PORT=${DROVER_SVC_ZK_PORT:-21810}
ZK_CLASSPATH=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar
JVM_FAST_START=${DROVER_SVC_JVM_OPTS--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}
APP_JVM_OPTS=${DROVER_SVC_APP_JVM_OPTS-$JVM_FAST_START}

# cluster -> "master_port ui_port rest_port worker_ui_port"
declare -A SPARK_PORTS=([a]="7077 8080 6066 8081" [b]="7078 8082 6067 8083")
# service name -> text its command line must contain (guards against a recycled PID)
declare -A MARKER=(
    [mariadb]=mariadbd
    [zookeeper]=org.apache.zookeeper.server.quorum.QuorumPeerMain
    [spark-a-master]=org.apache.spark.deploy.master.Master
    [spark-a-worker]=org.apache.spark.deploy.worker.Worker
    [spark-b-master]=org.apache.spark.deploy.master.Master
    [spark-b-worker]=org.apache.spark.deploy.worker.Worker
)
SERVICES=(mariadb zookeeper spark-a-master spark-a-worker spark-b-master spark-b-worker hadoop-a hadoop-b)

export LC_ALL=C  # EPOCHREALTIME and awk agree on the decimal point
# shellcheck source=scripts/hadoop/services.sh
. "$ROOT/scripts/hadoop/services.sh"

log() { printf '[services] %s\n' "$*"; }
die() { printf '[services] ERROR: %s\n' "$*" >&2; exit 1; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }'; }

clusters() {
    case $SPARK_CLUSTERS in
        1) echo a ;;
        2) echo a b ;;
        *) die "SPARK_CLUSTERS must be 1 or 2, not '$SPARK_CLUSTERS'" ;;
    esac
}

# --- processes -------------------------------------------------------------------------------

pidfile() { echo "$STATE/$1.pid"; }

# Print the PID of service $1 if its pid file names a live process running that service.
running() {
    local file pid cmdline
    file=$(pidfile "$1")
    [[ -s $file ]] || return 1
    pid=$(<"$file")
    [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    [[ $cmdline == *"${MARKER[$1]}"* ]] || return 1
    echo "$pid"
}

# Start "$@" in its own session (so `down` can signal the whole process group), output to $2.
start_detached() {
    local name=$1 logfile=$2
    shift 2
    printf '\n==== %s: %s\n' "$(date -Is)" "$*" >>"$logfile"
    (
        close_fds
        exec setsid "$@"
    ) >>"$logfile" 2>&1 </dev/null &
    echo $! >"$(pidfile "$name")"
}

# Close every file descriptor above 2 of the calling (sub)shell. A service must not inherit, and
# so hold for its whole life, a lock or a pipe of whoever started this script: `flock FILE cmd`
# hands its lock to cmd, and a daemon started under it kept the lock until it stopped.
close_fds() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)); then
            eval "exec $fd>&-" 2>/dev/null || true
        fi
    done
}

# Stop the given services, those we started, all at once: SIGTERM (to the process group when the
# service leads one), wait up to 20 s (MariaDB 60 s, a Hadoop test cluster 3 s) for each, then
# SIGKILL. A Hadoop test
# cluster's containers run in sessions of their own: they are its descendants, stopped with it.
stop_services() {
    local name pid pgid t0=$EPOCHREALTIME
    local -A target=() deadline=() killed=()
    local -a strays=()
    for name in "$@"; do
        if ! pid=$(running "$name"); then
            if [[ -e $(pidfile "$name") ]]; then
                log "$name: not running (removing stale pid file)"
                rm -f "$(pidfile "$name")"
            fi
            continue
        fi
        [[ $name == hadoop-* ]] && strays+=($(descendants "$pid"))
        pgid=$(ps -o pgid= -p "$pid" | tr -d ' ')
        target[$name]=$pid
        [[ $pgid == "$pid" ]] && target[$name]=-$pid
        deadline[$name]=$((SECONDS + 20))
        [[ $name == mariadb ]] && deadline[$name]=$((SECONDS + 60))
        # a Hadoop test cluster is thrown away (its next start is a fresh one) and its NodeManager
        # alone takes ~17 s to stop: SIGKILL after 3 s, its containers killed with it (below)
        [[ $name == hadoop-* ]] && deadline[$name]=$((SECONDS + 3))
        kill -TERM -- "${target[$name]}" 2>/dev/null || true
    done
    while ((${#target[@]} > 0)); do
        for name in "${!target[@]}"; do
            if ! target_alive "${target[$name]}"; then
                log "$name: stopped $([[ ${target[$name]} == -* ]] && echo 'process group' || echo pid)" \
                    "${target[$name]#-} in $(since "$t0")"
                rm -f "$(pidfile "$name")"
                unset "target[$name]"
            elif ((SECONDS >= deadline[$name] + 10)); then
                die "$name (${target[$name]}) survived SIGKILL"
            elif ((SECONDS >= deadline[$name])) && [[ -z ${killed[$name]:-} ]]; then
                log "$name: still alive after SIGTERM, sending SIGKILL"
                kill -KILL -- "${target[$name]}" 2>/dev/null || true
                killed[$name]=1
            fi
        done
        ((${#target[@]} > 0)) && sleep 0.1
    done
    # containers the NodeManager did not stop on its way out (a SIGKILLed cluster)
    for pid in "${strays[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    return 0
}

# The PIDs of every descendant of process $1.
descendants() {
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2 }
        END {
            for (p in parent) {
                q = parent[p]
                while (q != "" && q > 1) {
                    if (q == root) { print p; break }
                    q = parent[q]
                }
            }
        }'
}

# Is anything of $1 (a pid, or -pgid for a process group) still running? Zombies don't count: the
# init process of these machines reaps orphans only every few seconds.
target_alive() {
    local states
    if [[ $1 == -* ]]; then
        # the group was started with setsid: its pgid is also its session id
        states=$(ps -o stat= -s "${1#-}") || true
    else
        states=$(ps -o stat= -p "$1") || true
    fi
    [[ -n $states ]] && grep -qv '^Z' <<<"$states"
}

port_busy() { [[ -n $(ss -Hltn "sport = :$1") ]]; }
port_owner() { ss -Hltnp "sport = :$1" | head -n 3; }

# Poll "$@" every 0.1 s until it succeeds or $1 seconds have passed.
wait_until() {
    local limit=$1 deadline
    shift
    deadline=$((SECONDS + limit))
    until "$@"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

probe() { "$PY" "$PROBE" "$@"; }

fail_with_log() {
    local logfile=$1
    shift
    printf '[services] ERROR: %s\n--- last lines of %s:\n' "$*" "$logfile" >&2
    tail -n 25 "$logfile" >&2 || true
    exit 1
}

# --- packages --------------------------------------------------------------------------------

APT_UPDATED=0
# ensure_pkg PATH PKG... : apt-get install PKG... unless PATH exists.
ensure_pkg() {
    local path=$1
    shift
    [[ -e $path ]] && return 0
    [[ $EUID -eq 0 ]] || die "$path is missing; run as root (or install it): apt-get install $*"
    log "installing $* ($path is missing)"
    if ((!APT_UPDATED)); then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >>"$LOGS/apt.log" 2>&1 ||
            fail_with_log "$LOGS/apt.log" "apt-get update failed"
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >>"$LOGS/apt.log" 2>&1 ||
        fail_with_log "$LOGS/apt.log" "apt-get install $* failed"
    [[ -e $path ]] || die "installed $* but $path is still missing"
}

# --- MariaDB ---------------------------------------------------------------------------------

mysql_ping() {
    # exit status 0 whenever a server answers, even one that refuses our credentials
    mariadb-admin --no-defaults --protocol=tcp -h "$HOST" -P "$MYSQL_PORT" --connect-timeout=2 \
        ping >/dev/null 2>&1
}

mysql_root_ok() {
    mariadb --no-defaults --protocol=tcp -h "$HOST" -P "$MYSQL_PORT" -u root --connect-timeout=2 \
        -N -e 'SELECT 1' >/dev/null 2>&1
}

mysql_socket() {
    if [[ -n $MYSQL_DATADIR ]]; then echo "$STATE/mysql/mysqld.sock"; else echo /run/mysqld/mysqld.sock; fi
}

start_mariadb() {
    local logfile=$LOGS/mariadb.log user args
    ensure_pkg /usr/sbin/mariadbd mariadb-server
    rm -f "$(pidfile mariadb)"
    touch "$logfile"
    if [[ -n $MYSQL_DATADIR ]]; then
        user=$(id -un)
        mkdir -p "$MYSQL_DATADIR" "$STATE/mysql"
        if [[ ! -d $MYSQL_DATADIR/mysql ]]; then
            log "mariadb: initialising private data directory $MYSQL_DATADIR"
            mariadb-install-db --no-defaults --user="$user" --datadir="$MYSQL_DATADIR" \
                --auth-root-authentication-method=normal >>"$logfile" 2>&1 ||
                fail_with_log "$logfile" "mariadb-install-db failed"
        fi
        args=(--no-defaults --datadir="$MYSQL_DATADIR" --socket="$(mysql_socket)"
            --pid-file="$STATE/mysql/mariadbd.pid" --character-set-server=utf8mb4)
    else
        user=mysql
        mkdir -p /run/mysqld
        chown mysql:mysql /run/mysqld "$logfile"
        if [[ ! -d /var/lib/mysql/mysql ]]; then
            log "mariadb: initialising /var/lib/mysql"
            mariadb-install-db --user=mysql --datadir=/var/lib/mysql >>"$logfile" 2>&1 ||
                fail_with_log "$logfile" "mariadb-install-db failed"
        fi
        args=()
    fi
    (
        close_fds
        exec start-stop-daemon --start --background --make-pidfile --pidfile "$(pidfile mariadb)" \
            --chuid "$user" --exec /usr/sbin/mariadbd -- "${args[@]}" --user="$user" \
            --bind-address="$HOST" --port="$MYSQL_PORT" --log-error="$logfile"
    )
}

mysql_up() {
    local t0=$EPOCHREALTIME pid started=0
    if pid=$(running mariadb); then
        log "mariadb: running (pid $pid, started by services.sh)"
        started=1
    elif mysql_ping; then
        log "mariadb: using the server already on $HOST:$MYSQL_PORT (not started here; down leaves it)"
    else
        port_busy "$MYSQL_PORT" &&
            die "port $MYSQL_PORT is taken but no MySQL answers there: $(port_owner "$MYSQL_PORT")"
        start_mariadb
        pid=$(<"$(pidfile mariadb)")
        wait_until "$DEADLINE" mysql_ping_alive "$pid" ||
            fail_with_log "$LOGS/mariadb.log" "MariaDB did not answer on $HOST:$MYSQL_PORT"
        log "mariadb: started pid $pid, answered in $(since "$t0")"
        started=1
    fi
    if ! mysql_root_ok; then
        ((started)) || die "MariaDB on $HOST:$MYSQL_PORT refuses root without a password; the" \
            "test suite needs it (ALTER USER root@localhost IDENTIFIED VIA mysql_native_password" \
            "USING PASSWORD('') OR unix_socket)"
        log "mariadb: allowing root without a password over TCP (server started here)"
        mariadb --no-defaults -S "$(mysql_socket)" -u root -e "ALTER USER 'root'@'localhost'
            IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket" ||
            die "could not change root's authentication"
        mysql_root_ok || die "root still cannot log in over TCP"
    fi
}

mysql_ping_alive() {
    target_alive "$1" ||
        fail_with_log "$LOGS/mariadb.log" "MariaDB (pid $1) exited while starting"
    mysql_ping
}

# --- ZooKeeper -------------------------------------------------------------------------------

zk_up() {
    local t0=$EPOCHREALTIME dir=$STATE/zk pid
    if pid=$(running zookeeper); then
        log "zookeeper: running (pid $pid, started by services.sh)"
    elif port_busy "$ZK_PORT"; then
        probe zk "$HOST:$ZK_PORT" --wait 5 ||
            die "port $ZK_PORT is taken but no ZooKeeper answers there: $(port_owner "$ZK_PORT")"
        log "zookeeper: using the server already on $HOST:$ZK_PORT (not started here; down leaves it)"
        return 0
    else
        ensure_pkg /usr/bin/java --no-install-recommends default-jre-headless
        ensure_pkg /usr/share/java/zookeeper.jar zookeeper
        # a fresh start gets a fresh tree: no znodes left over from earlier runs
        rm -rf "$dir"
        mkdir -p "$dir/data"
        cat >"$dir/zoo.cfg" <<EOF
# private test instance written by scripts/services.sh
tickTime=500
initLimit=10
syncLimit=5
minSessionTimeout=1000
maxSessionTimeout=20000
dataDir=$dir/data
clientPort=$ZK_PORT
clientPortAddress=$HOST
admin.enableServer=false
maxClientCnxns=0
EOF
        # shellcheck disable=SC2086 # JVM_FAST_START is a list of options
        start_detached zookeeper "$LOGS/zookeeper.log" java -Xmx256m $JVM_FAST_START -cp "$ZK_CLASSPATH" \
            org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg"
        pid=$(<"$(pidfile zookeeper)")
    fi
    probe zk "$HOST:$ZK_PORT" --wait "$DEADLINE" --pid "$pid" ||
        fail_with_log "$LOGS/zookeeper.log" "ZooKeeper did not answer on $HOST:$ZK_PORT"
    log "zookeeper: pid $pid answered in $(since "$t0")"
}

# --- Spark standalone ------------------------------------------------------------------------

spark_home() {
    [[ -x $PY ]] || die "$PY is missing: run scripts/setup.sh first"
    "$PY" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("pyspark").origin))' ||
        die "pyspark is not installed in .venv: run scripts/setup.sh first"
}

# Spark clusters start in three phases, each for all clusters at once (a JVM takes 3-5 s to
# start here): masters; then, once a master answers, its worker (a worker started before its
# master listens retries only every 5-15 s); then wait for ALIVE workers and the REST servers.
declare -A SPARK_T0=() SPARK_EXTERNAL=()

spark_urls() {
    local mport uport rport wport
    read -r mport uport rport wport <<<"${SPARK_PORTS[$1]}"
    echo "spark://$HOST:$mport http://$HOST:$uport http://$HOST:$rport $mport $uport $rport $wport"
}

spark_start_master() {
    local c=$1 dir=$STATE/spark-$1 master ui rest mport uport rport wport pid
    read -r master ui rest mport uport rport wport <<<"$(spark_urls "$c")"
    SPARK_T0[$c]=$EPOCHREALTIME
    if pid=$(running "spark-$c-master"); then
        log "spark-$c: master running (pid $pid, started by services.sh)"
    elif port_busy "$mport" || port_busy "$uport" || port_busy "$rport"; then
        { probe spark-master "$ui" --wait 5 && probe spark-rest "$rest" --wait 5; } ||
            die "spark-$c ports ($mport, $uport, $rport) are taken by something that is not a" \
                "ready Spark master with a worker: $(port_owner "$mport") $(port_owner "$uport")"
        log "spark-$c: using the cluster already on $ui (not started here; down leaves it)"
        SPARK_EXTERNAL[$c]=1
    else
        mkdir -p "$dir/work"
        cat >"$dir/master.properties" <<EOF
# written by scripts/services.sh: the REST submission server, on loopback
spark.master.rest.enabled=true
spark.master.rest.host=$HOST
spark.master.rest.port=$rport
EOF
        start_detached "spark-$c-master" "$LOGS/spark-$c-master.log" \
            "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
            --host "$HOST" --port "$mport" --webui-port "$uport" \
            --properties-file "$dir/master.properties"
    fi
}

spark_start_worker() {
    local c=$1 dir=$STATE/spark-$1 master ui rest mport uport rport wport mpid pid
    [[ -z ${SPARK_EXTERNAL[$c]:-} ]] || return 0
    read -r master ui rest mport uport rport wport <<<"$(spark_urls "$c")"
    mpid=$(<"$(pidfile "spark-$c-master")")
    probe spark-master "$ui" --min-workers 0 --wait "$DEADLINE" --pid "$mpid" ||
        fail_with_log "$LOGS/spark-$c-master.log" "Spark master $c did not come up on $ui"
    log "spark-$c: master pid $mpid answered in $(since "${SPARK_T0[$c]}")"
    if pid=$(running "spark-$c-worker"); then
        log "spark-$c: worker running (pid $pid, started by services.sh)"
        return 0
    fi
    mkdir -p "$dir/work"
    # drivers and executors this worker launches default to the project's interpreter, and their
    # JVMs (children of the worker, which inherit its environment) to the fast-start options too:
    # the tests' drivers and executors live for seconds to minutes, where C2's compilations and a
    # parallel GC's threads cost two shared cores more than they give back
    PYSPARK_PYTHON=$PY JAVA_TOOL_OPTIONS=$APP_JVM_OPTS \
        start_detached "spark-$c-worker" "$LOGS/spark-$c-worker.log" \
        "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker "$master" \
        --host "$HOST" --cores 8 --memory 6g --webui-port "$wport" --work-dir "$dir/work"
}

spark_wait_ready() {
    local c=$1 master ui rest mport uport rport wport mpid wpid
    [[ -z ${SPARK_EXTERNAL[$c]:-} ]] || return 0
    read -r master ui rest mport uport rport wport <<<"$(spark_urls "$c")"
    mpid=$(<"$(pidfile "spark-$c-master")")
    wpid=$(<"$(pidfile "spark-$c-worker")")
    probe spark-master "$ui" --wait "$DEADLINE" --pid "$mpid" --pid "$wpid" ||
        fail_with_log "$LOGS/spark-$c-worker.log" "no ALIVE worker registered with master $c"
    probe spark-rest "$rest" --wait "$DEADLINE" --pid "$mpid" ||
        fail_with_log "$LOGS/spark-$c-master.log" "Spark REST server $c did not answer on $rest"
    log "spark-$c: worker pid $wpid ALIVE, REST $rest ready; cluster up in $(since "${SPARK_T0[$c]}")"
}

spark_up() {
    local c
    ensure_pkg /usr/bin/java --no-install-recommends default-jre-headless
    for c in "$@"; do spark_start_master "$c"; done
    for c in "$@"; do spark_start_worker "$c"; done
    for c in "$@"; do spark_wait_ready "$c"; done
}

# --- commands --------------------------------------------------------------------------------

# The Spark defaults of what the tests submit with spark-submit (local mode, client mode): the
# drivers and executors it starts get the fast-start JVM options too (the workers' own children
# get them from JAVA_TOOL_OPTIONS). Tests and their nodes find it through SPARK_CONF_DIR (in
# var/services/env; nodes pass it on to drivers); the daemons started here do not read it.
write_spark_conf() {
    mkdir -p "$STATE/spark-conf"
    {
        echo "# written by scripts/services.sh for the tests' spark-submit runs"
        if [[ -n $APP_JVM_OPTS ]]; then
            echo "spark.driver.defaultJavaOptions $APP_JVM_OPTS"
            echo "spark.executor.defaultJavaOptions $APP_JVM_OPTS"
        fi
    } >"$STATE/spark-conf/spark-defaults.conf"
}

write_env() {
    local c upper mport uport rport wport
    {
        echo "# written by scripts/services.sh up on $(date -Is); use: set -a; . var/services/env; set +a"
        printf 'DROVER_TEST_MYSQL_URL=%q\n' "mysql+pymysql://root@$HOST:$MYSQL_PORT"
        printf 'DROVER_TEST_ZK_HOSTS=%q\n' "$HOST:$ZK_PORT"
        for c in $(clusters); do
            upper=${c^^}
            read -r mport uport rport wport <<<"${SPARK_PORTS[$c]}"
            printf 'DROVER_TEST_SPARK_%s_MASTER=%q\n' "$upper" "spark://$HOST:$mport"
            printf 'DROVER_TEST_SPARK_%s_REST=%q\n' "$upper" "http://$HOST:$rport"
            printf 'DROVER_TEST_SPARK_%s_UI=%q\n' "$upper" "http://$HOST:$uport"
        done
        printf 'SPARK_HOME=%q\n' "$SPARK_HOME"
        printf 'SPARK_CONF_DIR=%q\n' "$STATE/spark-conf"
        hadoop_env
    } >"$STATE/env.tmp"
    mv "$STATE/env.tmp" "$STATE/env"
}

# Replace the Hadoop clusters' lines of var/services/env (created if missing) by the current ones.
write_hadoop_env() {
    {
        if [[ -s $STATE/env ]]; then
            grep -v '^DROVER_TEST_YARN_' "$STATE/env" || true
        else
            echo "# written by scripts/services.sh up hadoop on $(date -Is); use: set -a; . var/services/env; set +a"
        fi
        hadoop_env
    } >"$STATE/env.tmp"
    mv "$STATE/env.tmp" "$STATE/env"
}

cmd_up() {
    local t0=$EPOCHREALTIME c
    SPARK_HOME=$(spark_home)
    export SPARK_HOME SPARK_LOCAL_IP=$HOST SPARK_LOCAL_HOSTNAME=$HOST
    # C1-only JIT and the serial GC start these small daemons ~40% faster on 2 cores; they apply
    # to spark-class's launcher and the master/worker JVMs, not to drivers and executors.
    export SPARK_LAUNCHER_OPTS=$JVM_FAST_START SPARK_DAEMON_JAVA_OPTS=$JVM_FAST_START
    # the Hadoop test clusters start first and come up while the others start (~20 s each)
    # shellcheck disable=SC2046
    hadoop_up_begin $(hadoop_clusters)
    mysql_up
    zk_up
    # shellcheck disable=SC2046
    spark_up $(clusters)
    browser_up
    # shellcheck disable=SC2046
    hadoop_up_end $(hadoop_clusters)
    write_spark_conf
    write_env
    log "all services up in $(since "$t0"); environment in ${STATE#"$ROOT"/}/env"
}

hadoop_up_begin() {
    local c
    (($# > 0)) || return 0
    hadoop_build
    for c in "$@"; do hadoop_start "$c"; done
}

hadoop_up_end() {
    local c
    for c in "$@"; do hadoop_wait "$c"; done
}

cmd_up_hadoop() {
    local t0=$EPOCHREALTIME
    HADOOP_CLUSTERS=${HADOOP_CLUSTERS:-2}
    # shellcheck disable=SC2046
    hadoop_up_begin $(hadoop_clusters)
    # shellcheck disable=SC2046
    hadoop_up_end $(hadoop_clusters)
    write_hadoop_env
    log "hadoop clusters up in $(since "$t0"); environment in ${STATE#"$ROOT"/}/env"
}

cmd_down_hadoop() {
    stop_services hadoop-a hadoop-b
    HADOOP_CLUSTERS=0
    [[ -s $STATE/env ]] && write_hadoop_env
    return 0
}

cmd_down() {
    stop_services "${SERVICES[@]}"
    rm -f "$STATE/env"
    if mysql_ping; then log "mariadb: still answering on $HOST:$MYSQL_PORT (not started here)"; fi
}

cmd_status() {
    local ok=0 name pid how c mport uport rport wport
    status_line() { printf '  %-16s %-34s %s\n' "$1" "$2" "$3"; }
    who() { if pid=$(running "$1"); then echo "started here, pid $pid"; else echo "not started here"; fi; }

    if mysql_ping && mysql_root_ok; then how=ready; else how="NOT READY"; ok=1; fi
    status_line mariadb "$(who mariadb)" "$HOST:$MYSQL_PORT $how"
    if probe zk "$HOST:$ZK_PORT" 2>/dev/null; then how=ready; else how="NOT READY"; ok=1; fi
    status_line zookeeper "$(who zookeeper)" "$HOST:$ZK_PORT $how"
    for c in a b; do
        read -r mport uport rport wport <<<"${SPARK_PORTS[$c]}"
        if probe spark-master "http://$HOST:$uport" 2>/dev/null &&
            probe spark-rest "http://$HOST:$rport" 2>/dev/null; then
            how="ready (ALIVE worker, REST answers)"
        else
            how="NOT READY"
            # cluster b only counts when it was asked for
            [[ $c == a || $SPARK_CLUSTERS == 2 ]] && ok=1
        fi
        status_line "spark-$c-master" "$(who "spark-$c-master")" "spark://$HOST:$mport $how"
        status_line "spark-$c-worker" "$(who "spark-$c-worker")" "UI http://$HOST:$wport"
    done
    hadoop_status || ok=1
    return "$ok"
}

# Debian's chromium for the console's browser tests (tests/e2e/test_console_browser.py); the
# recommended packages (fonts aside) are not needed headless.
browser_up() {
    ensure_pkg /usr/bin/chromium --no-install-recommends chromium
}

cmd_install() {
    ensure_pkg /usr/bin/java --no-install-recommends default-jre-headless
    ensure_pkg /usr/share/java/zookeeper.jar zookeeper
    ensure_pkg /usr/sbin/mariadbd --no-install-recommends mariadb-server
    log "installed: java, zookeeper, mariadb-server"
}

main() {
    local usage="usage: $0 up|down|status|install|browser, or up|down|status hadoop"
    [[ $# -eq 1 || ($# -eq 2 && $2 == hadoop) ]] || die "$usage"
    mkdir -p "$STATE" "$LOGS"
    case $1${2:+-$2} in
        up | down | up-hadoop | down-hadoop)
            exec 9>"$STATE/.lock"
            flock -w 600 9 || die "another services.sh up/down still holds $STATE/.lock"
            "cmd_${1}${2:+_$2}"
            ;;
        status-hadoop) HADOOP_CLUSTERS=${HADOOP_CLUSTERS:-2} hadoop_status ;;
        status) cmd_status ;;
        install) cmd_install ;;
        browser) browser_up ;;
        *) die "$usage" ;;
    esac
}

main "$@"
