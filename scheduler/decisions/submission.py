"""The submission policy: what a job may run and which Spark properties it may set (pure).

- An entrypoint (and any ``--py-files`` a job names) must lie under one of its clusters' artifact
  roots: a path prefix (``/opt/pipelines/``) or a URL prefix (``s3a://bucket/pipelines/``). Paths
  are normalised first, so ``/opt/pipelines/../../etc/x.py`` is outside ``/opt/pipelines/``.
- Non-admins may set only the Spark properties of the allow-list (exact names, or ``prefix.*``);
  ``spark.drover.*`` keys Drover owns are never a job's to set.
"""

from __future__ import annotations

import posixpath
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
    conf: Mapping[str, str], allowed: Sequence[str], *, admin: bool
) -> list[str]:
    """The keys of ``conf`` this caller may not set, sorted (empty: all fine)."""
    refused = {k for k in conf if k in OWNED_PROPERTIES}
    if not admin:
        refused |= {k for k in conf if not property_allowed(k, allowed)}
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
) -> None:
    """The policy for a job whose clusters have these artifact roots (cluster -> roots; a
    cluster without roots of its own takes ``default_roots``): RefusedSubmission when the
    entrypoint lies outside any of them, or when ``conf`` sets a property ``subject`` may not
    (``admin``: on the job's team)."""
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
        refused = refused_properties(conf, allow_list, admin=admin)
        if refused:
            raise RefusedSubmission(
                f"these Spark properties may not be set by {subject}: "
                f"{', '.join(refused)} (only admins set properties outside the allow-list)",
                field="conf",
                properties=refused,
            )
