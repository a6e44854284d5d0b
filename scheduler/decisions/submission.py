"""The submission policy: what a job may run and which Spark properties it may set (pure).

- An entrypoint (and any ``--py-files`` a job names) must lie under one of its clusters' artifact
  roots: a path prefix (``/opt/pipelines/``) or a URL prefix (``s3a://bucket/pipelines/``). Paths
  are normalised first, so ``/opt/pipelines/../../etc/x.py`` is outside ``/opt/pipelines/``.
- Properties that choose what code runs -- an executable (``spark.pyspark.*python``), a class
  path or JVM options (``*.extraJavaOptions``, ``*.extraClassPath``, ``spark.jars*``), code
  shipped with the job (``spark.files``, ``spark.submit.pyFiles``), plugins, listeners,
  extensions, catalogs, class names, scripts, the executors' environment, Hadoop's configuration
  -- are a platform admin's (or the cluster's own fixed configuration), never a team's: see
  :func:`platform_only`. The rule is a list of *shapes* (families and name endings), so a
  property of that shape that Spark adds later is refused before anyone has listed it.
- Besides those, a team's admins may set any property; its other members only those of the
  allow-list (exact names, or ``prefix.*``). ``spark.drover.*`` keys Drover owns are never a
  job's to set.
- What a change keeps as it was is not judged again (``previous``): a team admin may edit the
  conf of a job a platform admin tuned without being refused for the tuning, never change it.
  A job moved to another team has no ``previous``: everything it carries is judged for that team.
- A driver's environment never chooses its executables or the code it loads
  (:func:`refused_environment`: ``LD_*``, ``PYTHON*``, JVM options, ``SPARK_*``, ``PATH``...).

Class names that only pick among the code a cluster ships (``spark.serializer``,
``spark.io.compression.codec``) stay a team's: without a way to add code to the class path they
choose nothing the platform did not install.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlparse

from scheduler.core.errors import RefusedSubmission

#: properties Drover sets itself on every run: nobody overrides them through a job's conf
OWNED_PROPERTIES = frozenset(
    {
        "spark.drover.job",
        "spark.drover.runId",
        "spark.drover.fencingToken",
        "spark.drover.checkpointLocation",
        "spark.drover.fenceUrls",
        "spark.drover.fenceAuth",
    }
)


#: families of Spark properties (a name, or a prefix ending in ``.``) only a platform admin sets:
#: executables and the code they load, the executors' environment, Hadoop's configuration
#: (file system classes, credential providers), catalogs and metastores, resource managers,
#: security, redaction, metrics sinks, and where Spark writes outside the job's own directories
PLATFORM_FAMILIES: tuple[str, ...] = (
    "spark.pyspark.",
    "spark.python.",
    "spark.r.",
    "spark.jars",
    "spark.jars.",
    "spark.files",
    "spark.archives",
    "spark.submit.",
    "spark.executorenv.",
    "spark.hadoop.",
    "spark.sql.catalog.",
    "spark.sql.hive.",
    "spark.yarn.",
    "spark.kubernetes.",
    "spark.mesos.",
    "spark.connect.",
    "spark.metrics.",
    "spark.redaction.",
    "spark.sql.redaction.",
    "spark.security.",
    "spark.ssl.",
    "spark.authenticate",
    "spark.authenticate.",
    "spark.network.crypto.",
    "spark.io.encryption.",
    "spark.ui.filters",
    "spark.local.dir",
    "spark.eventlog.",
    "spark.driver.log.",
    "spark.history.",
    "spark.api.mode",
)
#: name endings (of any dotted segment, case-insensitive) of properties that choose code: an
#: executable, JVM options, a class path, a library path, jars or archives, plugins, listeners,
#: extensions, a class or its implementation, provider, factory or manager, a script or command
PLATFORM_ENDINGS: tuple[str, ...] = (
    "python",
    "javaoptions",
    "classpath",
    "librarypath",
    "jars",
    "archives",
    "pyfiles",
    "plugin",
    "plugins",
    "listener",
    "listeners",
    "extension",
    "extensions",
    "class",
    "classes",
    "impl",
    "implementation",
    "provider",
    "providers",
    "factory",
    "manager",
    "registrator",
    "script",
    "command",
    "executable",
    "filters",
)
_PLATFORM_SEGMENT = re.compile(r"(?:" + "|".join(PLATFORM_ENDINGS) + r")$")
#: environment variables that choose executables or the code a process loads: the dynamic
#: linker, Python, the JVM, Spark and Hadoop's own, shells' start-up files, and the run's
#: identity Drover sets (prefixes end in ``_`` or ``*``)
REFUSED_ENVIRONMENT: tuple[str, ...] = (
    "LD_*",
    "PYTHON*",
    "PYSPARK_*",
    "SPARK_*",
    "HADOOP_*",
    "YARN_*",
    "JAVA_*",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "PATH",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "IFS",
    "DROVER_*",
)


def platform_only(key: str) -> bool:
    """Whether only a platform admin may set the Spark property ``key`` (see the module
    docstring). Compared without case or surrounding blanks: fail closed."""
    name = key.strip().lower()
    if any(name == f or (f.endswith(".") and name.startswith(f)) for f in PLATFORM_FAMILIES):
        return True
    return any(_PLATFORM_SEGMENT.search(segment) for segment in name.split("."))


def refused_environment(env: Mapping[str, str]) -> list[str]:
    """The names of ``env`` a driver's environment may not set, sorted."""
    refused = set()
    for name in env:
        upper = name.strip().upper()
        for pattern in REFUSED_ENVIRONMENT:
            if upper == pattern or (pattern.endswith("*") and upper.startswith(pattern[:-1])):
                refused.add(name)
    return sorted(refused)


def _normal_path(path: str) -> str:
    return posixpath.normpath(path) if path else path


def normalise_artifact(location: str) -> tuple[str, str]:
    """``(scheme, normalised location)``: ``file://`` URLs become plain paths."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        path = parsed.path if parsed.scheme == "file" else location
        return "", _normal_path(path)
    # keep scheme://netloc, normalise the path part
    return parsed.scheme, f"{parsed.scheme}://{parsed.netloc}{_normal_path(parsed.path or '/')}"


def artifact_allowed(location: str, roots: Iterable[str]) -> bool:
    """Whether ``location`` lies under one of ``roots`` (a root is a directory: ``/a`` covers
    ``/a/x.py``, not ``/ab/x.py``)."""
    scheme, where = normalise_artifact(location)
    if scheme == "" and not where.startswith("/"):
        return False  # a relative path means whatever the node's working directory is
    for root in roots:
        root_scheme, base = normalise_artifact(root.strip())
        if not base or root_scheme != scheme:
            continue
        base = base.rstrip("/")
        if where == base or where.startswith(base + "/"):
            return True
    return False


def property_allowed(key: str, allowed: Sequence[str]) -> bool:
    for pattern in allowed:
        if pattern.endswith("*"):
            if key.startswith(pattern[:-1]):
                return True
        elif key == pattern:
            return True
    return False


def refused_properties(
    conf: Mapping[str, str],
    allowed: Sequence[str],
    *,
    admin: bool,
    platform_admin: bool = False,
    previous: Mapping[str, str] | None = None,
) -> list[str]:
    """The keys of ``conf`` this caller may not set, sorted (empty: all fine). ``admin``: of
    the job's team; ``platform_admin``: of every team; ``previous``: the conf the job has now
    (what keeps its value there is not judged again)."""
    kept = previous or {}
    judged = [k for k, v in conf.items() if k not in kept or kept[k] != v]
    refused = {k for k in judged if k in OWNED_PROPERTIES}
    if platform_admin:
        return sorted(refused)
    refused |= {k for k in judged if platform_only(k)}
    if not admin:
        refused |= {k for k in judged if not property_allowed(k, allowed)}
    return sorted(refused)


def check(
    clusters: Mapping[str, Sequence[str]],
    *,
    default_roots: Sequence[str],
    allow_list: Sequence[str],
    admin: bool,
    subject: str,
    entrypoint: str | None,
    conf: Mapping[str, str] | None,
    platform_admin: bool = False,
    previous_conf: Mapping[str, str] | None = None,
) -> None:
    """The policy for a job whose clusters have these artifact roots (cluster -> roots; a
    cluster without roots of its own takes ``default_roots``): RefusedSubmission when the
    entrypoint lies outside any of them, or when ``conf`` sets a property ``subject`` may not
    (``admin``: on the job's team; ``platform_admin``: on every team; ``previous_conf``: what
    the job has now, when it stays in its team)."""
    if entrypoint is not None:
        for cluster, roots in clusters.items():
            allowed = tuple(roots) or tuple(default_roots)
            if not artifact_allowed(entrypoint, allowed):
                raise RefusedSubmission(
                    f"entrypoint {entrypoint!r} is outside the artifact roots of cluster "
                    f"{cluster!r} ({', '.join(allowed)})",
                    field="entrypoint",
                )
    if conf:
        refused = refused_properties(
            conf, allow_list, admin=admin, platform_admin=platform_admin, previous=previous_conf
        )
        if refused:
            why = (
                "properties that choose executables, class paths, JVM options, plugins, "
                "listeners, extensions or catalogs are a platform admin's"
                if any(platform_only(k) for k in refused)
                else "only the team's admins set properties outside the allow-list"
            )
            raise RefusedSubmission(
                f"these Spark properties may not be set by {subject}: {', '.join(refused)} ({why})",
                field="conf",
                properties=refused,
            )
