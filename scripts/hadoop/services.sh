# The YARN + HDFS test clusters of scripts/services.sh (sourced by it; not run on its own).
#
# Per cluster c in a b: one JVM (scripts/hadoop/TestClusters.java on Hadoop's own test clusters,
# hadoop-client-minicluster of the version the pyspark wheel's Hadoop client jars have) with one
# ResourceManager (recovery on, FileSystemRMStateStore), one NodeManager and one HDFS NameNode +
# DataNode, on fixed loopback ports (base 9100 for a, 9130 for b):
#
#   +0 RM RPC   +1 RM scheduler   +2 RM resource tracker   +3 RM admin   +4 RM web (REST)
#   +5 NameNode RPC (hdfs://)   +6 NameNode HTTP (WebHDFS)   +7/+8/+9 DataNode data/HTTP/IPC
#   +10 the launcher's control server (tests restart the ResourceManager through it)
#   +11 NodeManager RPC   +12 NodeManager localizer   +13 NodeManager web (container logs)
# Jars: Maven resolves them into its local repository (~/.m2, ~130 MB, ~50 s the first time);
# the launcher is compiled with javac into var/hadoop/ (never committed).
#
# Environment: HADOOP_CLUSTERS (0, 1 or 2), DROVER_SVC_HADOOP_HEAP (the JVM's -Xmx, default
# 384m), DROVER_SVC_HADOOP_NM_MB (memory the NodeManager offers containers, default 16384: the
# failover bench's 10 jobs of 1.5 GB each on one cluster; an accounting figure, not a reservation).

HADOOP_SRC=$ROOT/scripts/hadoop
HADOOP_BUILD=$ROOT/var/hadoop
HADOOP_HEAP=${DROVER_SVC_HADOOP_HEAP:-384m}
HADOOP_NM_MB=${DROVER_SVC_HADOOP_NM_MB:-16384}
declare -A HADOOP_BASE=([a]=9100 [b]=9130)
MARKER[hadoop-a]=TestClusters
MARKER[hadoop-b]=TestClusters
declare -A HADOOP_T0=()

hadoop_clusters() {
    case ${HADOOP_CLUSTERS:-0} in
        0) ;;
        1) echo a ;;
        2) echo a b ;;
        *) die "HADOOP_CLUSTERS must be 0, 1 or 2, not '$HADOOP_CLUSTERS'" ;;
    esac
}

hadoop_port() { echo $((HADOOP_BASE[$1] + $2)); }

# Resolve the jars (Maven) and compile the launcher (javac), unless both are up to date.
hadoop_build() {
    local cp=$HADOOP_BUILD/classpath.txt classes=$HADOOP_BUILD/classes t0=$EPOCHREALTIME
    ensure_pkg /usr/bin/javac --no-install-recommends default-jdk-headless
    ensure_pkg /usr/bin/mvn --no-install-recommends maven
    mkdir -p "$HADOOP_BUILD"
    if [[ ! -s $cp || $HADOOP_SRC/pom.xml -nt $cp ]] || ! hadoop_jars_present "$cp"; then
        log "hadoop: resolving the test clusters' jars with Maven"
        mvn -B -q -f "$HADOOP_SRC/pom.xml" dependency:build-classpath \
            -Dmdep.outputFile="$cp.tmp" >"$LOGS/hadoop-build.log" 2>&1 ||
            fail_with_log "$LOGS/hadoop-build.log" "Maven could not resolve the Hadoop test cluster jars"
        mv "$cp.tmp" "$cp"
    fi
    if [[ ! -s $classes/TestClusters.class || $HADOOP_SRC/TestClusters.java -nt $classes/TestClusters.class ]]; then
        mkdir -p "$classes"
        javac -nowarn -cp "$(<"$cp")" -d "$classes" "$HADOOP_SRC/TestClusters.java" \
            >>"$LOGS/hadoop-build.log" 2>&1 ||
            fail_with_log "$LOGS/hadoop-build.log" "javac could not compile TestClusters.java"
        log "hadoop: launcher built in $(since "$t0")"
    fi
}

hadoop_jars_present() {
    local jar
    IFS=: read -r -a jars <"$1"
    for jar in "${jars[@]}"; do [[ -s $jar ]] || return 1; done
}

# Write the site files of cluster $1: the launcher reads them, clients use the directory as
# their HADOOP_CONF_DIR.
hadoop_write_conf() {
    local c=$1 dir=$STATE/hadoop-$1 conf i
    conf=$dir/conf
    mkdir -p "$conf"
    prop() { printf '  <property><name>%s</name><value>%s</value></property>\n' "$1" "$2"; }
    site() {
        printf '<?xml version="1.0"?>\n<!-- written by scripts/services.sh: test cluster %s -->\n<configuration>\n' "$c"
        cat
        printf '</configuration>\n'
    }
    {
        prop fs.defaultFS "hdfs://$HOST:$(hadoop_port "$c" 5)"
        prop hadoop.tmp.dir "$dir/tmp"
    } | site >"$conf/core-site.xml"
    {
        prop drover.test.namenode.port "$(hadoop_port "$c" 5)"
        prop drover.test.namenode.http.port "$(hadoop_port "$c" 6)"
        prop dfs.namenode.http-address "$HOST:$(hadoop_port "$c" 6)"
        prop dfs.datanode.address "$HOST:$(hadoop_port "$c" 7)"
        prop dfs.datanode.http.address "$HOST:$(hadoop_port "$c" 8)"
        prop dfs.datanode.ipc.address "$HOST:$(hadoop_port "$c" 9)"
        prop dfs.replication 1
        prop dfs.permissions.enabled false
        prop dfs.webhdfs.enabled true
        prop dfs.namenode.safemode.extension 0
        # the NameNode's deleted-block scrubber wakes every 10 ms by default (a tenth of the
        # idle JVM's CPU); deleted blocks may go a second later here
        prop dfs.namenode.block.deletion.unlock.interval.ms 1000
    } | site >"$conf/hdfs-site.xml"
    {
        prop yarn.minicluster.fixed.ports true
        prop yarn.minicluster.use-rpc true
        prop yarn.resourcemanager.hostname "$HOST"
        prop yarn.resourcemanager.address "$HOST:$(hadoop_port "$c" 0)"
        prop yarn.resourcemanager.scheduler.address "$HOST:$(hadoop_port "$c" 1)"
        prop yarn.resourcemanager.resource-tracker.address "$HOST:$(hadoop_port "$c" 2)"
        prop yarn.resourcemanager.admin.address "$HOST:$(hadoop_port "$c" 3)"
        prop yarn.resourcemanager.webapp.address "$HOST:$(hadoop_port "$c" 4)"
        # a restarted ResourceManager recovers its applications (and the NodeManager keeps
        # their containers: work-preserving recovery)
        prop yarn.resourcemanager.recovery.enabled true
        prop yarn.resourcemanager.work-preserving-recovery.enabled true
        prop yarn.resourcemanager.store.class \
            org.apache.hadoop.yarn.server.resourcemanager.recovery.FileSystemRMStateStore
        prop yarn.resourcemanager.fs.state-store.uri "file://$dir/rmstore"
        # clients, the NodeManager and ApplicationMasters find a restarted RM within a second
        prop yarn.resourcemanager.connect.retry-interval.ms 500
        prop yarn.nodemanager.resourcemanager.connect.retry-interval.ms 500
        prop yarn.nodemanager.resourcemanager.connect.max-wait.ms -1
        prop yarn.resourcemanager.nodemanagers.heartbeat-interval-ms 500
        prop yarn.nodemanager.address "$HOST:$(hadoop_port "$c" 11)"
        prop yarn.nodemanager.localizer.address "$HOST:$(hadoop_port "$c" 12)"
        prop yarn.nodemanager.webapp.address "$HOST:$(hadoop_port "$c" 13)"
        prop yarn.nodemanager.local-dirs "$dir/work/nm-local"
        prop yarn.nodemanager.log-dirs "$dir/work/nm-logs"
        # containers are small Spark drivers and executors: no memory checks
        prop yarn.nodemanager.resource.memory-mb "$HADOOP_NM_MB"
        prop yarn.nodemanager.resource.cpu-vcores 8
        prop yarn.scheduler.minimum-allocation-mb 128
        prop yarn.scheduler.maximum-allocation-mb 2048
        prop yarn.nodemanager.pmem-check-enabled false
        prop yarn.nodemanager.vmem-check-enabled false
        prop yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage 100
        prop yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb 0
        prop yarn.log-aggregation-enable false
        prop yarn.timeline-service.enabled false
        prop yarn.resourcemanager.am.max-attempts 2
    } | site >"$conf/yarn-site.xml"
    # the capacity scheduler's queues: default plus one per business the tests use
    local queues=(default orders ads payments)
    {
        prop yarn.scheduler.capacity.root.queues "$(IFS=,; echo "${queues[*]}")"
        prop yarn.scheduler.capacity.maximum-am-resource-percent 1.0
        prop yarn.scheduler.capacity.root.acl_submit_applications '*'
        prop yarn.scheduler.capacity.root.acl_administer_queue '*'
        # asynchronous scheduling (on by default) looks for work every 5 ms, a third of the idle
        # JVM's CPU; a container waits at most 100 ms more for its allocation
        prop yarn.scheduler.capacity.schedule-asynchronously.scheduling-interval-ms 100
        for i in "${queues[@]}"; do
            prop "yarn.scheduler.capacity.root.$i.capacity" "$([[ $i == default ]] && echo 40 || echo 20)"
            prop "yarn.scheduler.capacity.root.$i.maximum-capacity" 100
            prop "yarn.scheduler.capacity.root.$i.user-limit-factor" 10
            prop "yarn.scheduler.capacity.root.$i.state" RUNNING
            prop "yarn.scheduler.capacity.root.$i.acl_submit_applications" '*'
            prop "yarn.scheduler.capacity.root.$i.acl_administer_queue" '*'
        done
    } | site >"$conf/capacity-scheduler.xml"
    # a client-side log4j configuration: spark-submit and yarn commands print warnings only
    printf 'log4j.rootLogger=WARN, console\nlog4j.appender.console=org.apache.log4j.ConsoleAppender\nlog4j.appender.console.layout=org.apache.log4j.PatternLayout\nlog4j.appender.console.layout.ConversionPattern=%%d %%p %%c: %%m%%n\n' \
        >"$conf/log4j.properties"
}

hadoop_start() {
    local c=$1 dir=$STATE/hadoop-$1 pid p
    HADOOP_T0[$c]=$EPOCHREALTIME
    if pid=$(running "hadoop-$c"); then
        log "hadoop-$c: running (pid $pid, started by services.sh)"
        return 0
    fi
    for p in 0 1 2 3 4 5 6 7 8 9 10 11 12 13; do
        port_busy "$(hadoop_port "$c" "$p")" &&
            die "hadoop-$c: port $(hadoop_port "$c" "$p") is taken: $(port_owner "$(hadoop_port "$c" "$p")")"
    done
    # a fresh start is a fresh cluster: no HDFS blocks, RM state or containers of earlier runs
    rm -rf "$dir"
    mkdir -p "$dir/work"
    hadoop_write_conf "$c"
    # JAVA_HOME: the NodeManager's containers run {{JAVA_HOME}}/bin/java
    JAVA_HOME=${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")} \
        start_detached "hadoop-$c" "$LOGS/hadoop-$c.log" \
        env -C "$dir/work" java -Xmx"$HADOOP_HEAP" $JVM_FAST_START -Djava.net.preferIPv4Stack=true \
        -Dlog4j.configuration="file:$dir/conf/log4j.properties" \
        -cp "$HADOOP_BUILD/classes:$(<"$HADOOP_BUILD/classpath.txt")" \
        TestClusters "$dir/conf" "$dir/work" "$(hadoop_port "$c" 10)"
}

hadoop_ready() {
    local c=$1 pid=$2
    target_alive "$pid" || fail_with_log "$LOGS/hadoop-$c.log" "hadoop-$c (pid $pid) exited while starting"
    [[ -s $STATE/hadoop-$c/work/ready ]]
}

hadoop_wait() {
    local c=$1 pid
    pid=$(<"$(pidfile "hadoop-$c")")
    wait_until "$DEADLINE" hadoop_ready "$c" "$pid" ||
        fail_with_log "$LOGS/hadoop-$c.log" "hadoop-$c did not come up within ${DEADLINE}s"
    probe yarn "http://$HOST:$(hadoop_port "$c" 4)" --wait "$DEADLINE" --pid "$pid" ||
        fail_with_log "$LOGS/hadoop-$c.log" "hadoop-$c: the ResourceManager's REST API is not ready"
    log "hadoop-$c: pid $pid ready in $(since "${HADOOP_T0[$c]}")" \
        "($(tr '\n' ' ' <"$STATE/hadoop-$c/work/ready")RSS $(ps -o rss= -p "$pid" | awk '{printf "%.0f MB", $1/1024}'))"
}

# The environment lines of the Hadoop clusters (written to var/services/hadoop.env).
hadoop_env() {
    local c upper
    for c in $(hadoop_clusters); do
        upper=${c^^}
        printf 'DROVER_TEST_YARN_%s_RM=%q\n' "$upper" "http://$HOST:$(hadoop_port "$c" 4)"
        printf 'DROVER_TEST_YARN_%s_HDFS=%q\n' "$upper" "hdfs://$HOST:$(hadoop_port "$c" 5)"
        printf 'DROVER_TEST_YARN_%s_WEBHDFS=%q\n' "$upper" "http://$HOST:$(hadoop_port "$c" 6)"
        printf 'DROVER_TEST_YARN_%s_CONF=%q\n' "$upper" "$STATE/hadoop-$c/conf"
        printf 'DROVER_TEST_YARN_%s_CONTROL=%q\n' "$upper" "http://$HOST:$(hadoop_port "$c" 10)"
    done
}

hadoop_status() {
    local c pid how ok=0
    for c in a b; do
        if probe yarn "http://$HOST:$(hadoop_port "$c" 4)" 2>/dev/null; then
            how="ready (RM ACTIVE, NodeManager RUNNING)"
        else
            how="NOT READY"
            [[ " $(hadoop_clusters) " == *" $c "* ]] && ok=1
        fi
        if pid=$(running "hadoop-$c"); then pid="started here, pid $pid"; else pid="not started here"; fi
        printf '  %-16s %-34s %s\n' "hadoop-$c" "$pid" "RM http://$HOST:$(hadoop_port "$c" 4) hdfs://$HOST:$(hadoop_port "$c" 5) $how"
    done
    return "$ok"
}
