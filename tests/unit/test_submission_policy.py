"""The Spark properties only a platform admin sets (scheduler.decisions.submission, pure).

Properties that choose an executable, a class path, JVM options, plugins, listeners,
extensions, catalogs or the code a driver loads are the platform's: a team admin (who may set
anything else outside the allow-list) and an operator (who may set the allow-list) are refused
them, whatever the allow-list says; a key of that shape Spark may add later is refused too.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.errors import RefusedSubmission
from scheduler.decisions.submission import (
    check,
    platform_only,
    refused_environment,
    refused_properties,
)

#: what made a team admin run code as the node (and its neighbours)
PLATFORM_KEYS = [
    "spark.pyspark.python",
    "spark.pyspark.driver.python",
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
    "spark.driver.defaultJavaOptions",
    "spark.executor.defaultJavaOptions",
    "spark.driver.extraClassPath",
    "spark.executor.extraClassPath",
    "spark.driver.extraLibraryPath",
    "spark.executor.extraLibraryPath",
    "spark.jars",
    "spark.jars.packages",
    "spark.jars.repositories",
    "spark.jars.ivy",
    "spark.jars.ivySettings",
    "spark.jars.excludes",
    "spark.files",
    "spark.archives",
    "spark.submit.pyFiles",
    "spark.plugins",
    "spark.plugins.defaultList",
    "spark.sql.extensions",
    "spark.sql.queryExecutionListeners",
    "spark.sql.streaming.streamingQueryListeners",
    "spark.extraListeners",
    "spark.sql.catalog.spark_catalog",
    "spark.sql.catalog.lake.uri",
    "spark.sql.catalogImplementation",
    "spark.sql.hive.metastore.jars",
    "spark.sql.hive.metastore.jars.path",
    "spark.driver.resource.gpu.discoveryScript",
    "spark.executor.resource.gpu.discoveryScript",
    "spark.executorEnv.LD_PRELOAD",
    "spark.hadoop.fs.file.impl",
    "spark.python.worker.module",
    "spark.python.daemon.module",
    "spark.r.command",
    "spark.r.driver.command",
    "spark.sql.streaming.stateStore.providerClass",
    "spark.sql.streaming.checkpointFileManagerClass",
    "spark.sql.sources.commitProtocolClass",
    "spark.shuffle.manager",
    "spark.kryo.registrator",
    "spark.broadcast.factory",
    "spark.ui.filters",
    "spark.redaction.regex",
    "spark.metrics.conf",
    "spark.yarn.dist.jars",
    "spark.kubernetes.driver.podTemplateFile",
    "spark.connect.extensions.relation.classes",
    "spark.local.dir",
    "spark.eventLog.dir",
    "spark.sql.execution.pyspark.python",
]
#: tuning a team keeps (several are on the default allow-list)
TEAM_KEYS = [
    "spark.sql.shuffle.partitions",
    "spark.sql.adaptive.enabled",
    "spark.sql.streaming.checkpointLocation",
    "spark.executor.memory",
    "spark.driver.memory",
    "spark.serializer",
    "spark.dynamicAllocation.enabled",
    "spark.files.maxPartitionBytes",
    "spark.default.parallelism",
    "spark.task.maxFailures",
    "spark.driver.userClassPathFirst",
    "spark.sql.execution.arrow.pyspark.enabled",
    "spark.drover.fenceMaxBlindSeconds",
]
ALLOWED = ["spark.sql.*", "spark.executor.memory", "spark.driver.memory"]


@pytest.mark.parametrize("key", PLATFORM_KEYS)
def test_code_choosing_properties_are_the_platforms(key: str) -> None:
    assert platform_only(key), key
    conf = {key: "x"}
    assert refused_properties(conf, ALLOWED, admin=True) == [key]
    assert refused_properties(conf, ["spark.*"], admin=False) == [key]
    assert refused_properties(conf, ALLOWED, admin=True, platform_admin=True) == []


@pytest.mark.parametrize("key", TEAM_KEYS)
def test_tuning_stays_a_teams(key: str) -> None:
    assert not platform_only(key), key
    assert refused_properties({key: "1"}, ALLOWED, admin=True) == []


@pytest.mark.parametrize(
    "key",
    [
        "spark.foo.python",  # a Python executable of some future component
        "spark.newthing.extraJavaOptions",
        "spark.newthing.plugins",
        "spark.sql.newListeners",
        "spark.gizmo.providerClass",
        "spark.gizmo.factory",
        "spark.gizmo.launchScript",
        "SPARK.PYSPARK.PYTHON",  # Spark would not read it, and it is refused all the same
        " spark.pyspark.python",
    ],
)
def test_unknown_keys_of_that_shape_fail_closed(key: str) -> None:
    assert platform_only(key), key


@given(st.sampled_from(PLATFORM_KEYS), st.text(max_size=20))
def test_no_value_makes_a_platform_property_a_teams(key: str, value: str) -> None:
    assert refused_properties({key: value}, ["spark.*", "*"], admin=True) == [key]


def test_what_is_kept_as_it_was_is_not_judged_again() -> None:
    """A platform admin set a property on a team's job: the team's admin may change the rest of
    the conf (sending it whole) without being refused for what it keeps, never change it."""
    before = {"spark.sql.extensions": "com.example.Ext", "spark.executor.memory": "1g"}
    kept = {**before, "spark.executor.memory": "2g"}
    assert refused_properties(kept, ALLOWED, admin=True, previous=before) == []
    changed = {**before, "spark.sql.extensions": "com.evil.Ext"}
    assert refused_properties(changed, ALLOWED, admin=True, previous=before) == [
        "spark.sql.extensions"
    ]
    # an operator keeps an admin's property too, and is refused a new one
    extra = {"spark.network.timeout": "300s"}
    edited = {**extra, "spark.executor.memory": "3g"}
    assert refused_properties(edited, ALLOWED, admin=False, previous=extra) == []
    assert refused_properties(extra, ALLOWED, admin=False) == ["spark.network.timeout"]


def test_check_names_the_platform_properties() -> None:
    with pytest.raises(RefusedSubmission) as refused:
        check(
            {},
            default_roots=(),
            allow_list=ALLOWED,
            admin=True,
            subject="user:ann",
            entrypoint=None,
            conf={"spark.pyspark.driver.python": "/usr/bin/find", "spark.executor.memory": "1g"},
        )
    assert refused.value.extra["properties"] == ["spark.pyspark.driver.python"]
    assert "platform admin" in str(refused.value)
    check(
        {},
        default_roots=(),
        allow_list=ALLOWED,
        admin=True,
        platform_admin=True,
        subject="user:root",
        entrypoint=None,
        conf={"spark.pyspark.driver.python": "/opt/python/bin/python3"},
    )


@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "SPARK_SUBMIT_OPTS",
        "SPARK_HOME",
        "SPARK_CONF_DIR",
        "PYSPARK_PYTHON",
        "PYSPARK_DRIVER_PYTHON",
        "HADOOP_CONF_DIR",
        "PATH",
        "CLASSPATH",
        "BASH_ENV",
        "ENV",
        "DROVER_RUN_DIR",
        "DROVER_FENCING_TOKEN",
    ],
)
def test_a_drivers_environment_never_chooses_its_executables(name: str) -> None:
    assert refused_environment({name: "x", "ORDERS_REGION": "eu"}) == [name]


def test_plain_environment_is_fine() -> None:
    assert refused_environment({"ORDERS_REGION": "eu", "TZ": "UTC", "LANG": "C.UTF-8"}) == []
