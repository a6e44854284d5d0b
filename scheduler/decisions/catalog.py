"""Clusters and groups as records: what makes a cluster or a group valid (pure).

A cluster, as the API takes and shows it: ``name``, ``kind``, ``master_url``, ``rest_url``,
``ui_url``, ``az``, ``cloud``, ``storage_root``, capacity limits, read-only ``health``. What each
kind needs:

- ``standalone``: ``master_url`` (``spark://host:port``, several for a standby master
  ``spark://h1:7077,h2:7077``), ``rest_url`` (the REST submission server, ``http://host:6066``)
  and ``ui_url`` (the master's web UI, whose ``/json/`` lists applications);
- ``spark-submit``: ``master_url``: any master ``spark-submit --master`` accepts (``yarn``,
  ``k8s://https://host:port``, ``spark://…``, ``local[N]``); the URLs are optional;
- ``local``: nothing; ``master_url`` empty (the node's ``DROVER_SPARK_LOCAL_MASTER``) or
  ``local``/``local[N]``/``local[*]``;
- ``yarn``: ``rest_url`` (the ResourceManager's web address, ``http://rm:8088``: its REST API
  answers status, kill, listing and probes), ``hadoop_conf_dir`` (the absolute path, on every
  Drover node, of the cluster's Hadoop client configuration: ``spark-submit`` reads it);
  ``master_url`` empty or ``yarn``; ``ui_url`` optional (default: ``rest_url``).

Capacity limits (0 = unlimited): ``max_concurrent_submissions`` (submissions in flight at once),
``max_running_apps`` (live applications Drover keeps on the cluster), ``max_cores`` (the sum of
``spark.cores.max`` of those applications). The submission gate enforces them.

A group binds jobs to a ``primary_cluster`` and an optional ``failover_cluster`` that must differ.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, fields, replace
from typing import Any
from urllib.parse import urlsplit

from scheduler.core.errors import InvalidInput
from scheduler.core.names import validate_name
from scheduler.core.states import ClusterKind
from scheduler.decisions import storage

# re-exported for the catalog's callers; the health states live in scheduler.decisions.health
from scheduler.decisions.health import ClusterHealth as ClusterHealth
from scheduler.decisions.health import is_abnormal as is_abnormal

MAX_URL_LENGTH = 512
MAX_LABEL_LENGTH = 64
#: the largest capacity limit accepted (anything larger is a typo)
MAX_LIMIT = 1_000_000


@dataclass(frozen=True)
class ClusterSpec:
    """The writable fields of a cluster."""

    kind: str
    storage_root: str
    master_url: str = ""
    rest_url: str = ""
    ui_url: str = ""
    az: str = ""
    cloud: str = ""
    max_concurrent_submissions: int = 0
    max_running_apps: int = 0
    max_cores: int = 0
    hadoop_conf_dir: str = ""


CLUSTER_FIELDS = frozenset(f.name for f in fields(ClusterSpec))
LIMIT_FIELDS = ("max_concurrent_submissions", "max_running_apps", "max_cores")

_HOST_PORT = re.compile(
    r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})$"
)
_LOCAL_MASTER = re.compile(r"^local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?$")
_LOCAL_CLUSTER = re.compile(r"^local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]$")
_LABEL_PUNCTUATION = frozenset("-_.")


def spec_with(spec: ClusterSpec, changes: dict[str, Any]) -> ClusterSpec:
    """``spec`` with ``changes`` applied (not validated yet; see ``validate_cluster``)."""
    unknown = set(changes) - CLUSTER_FIELDS
    if unknown:
        raise InvalidInput(f"not cluster fields: {', '.join(sorted(unknown))}")
    return replace(spec, **changes)


def validate_cluster(spec: ClusterSpec) -> ClusterSpec:
    """``spec`` checked and normalised (URLs without trailing slash, storage root as a URI)."""
    try:
        kind = ClusterKind(spec.kind)
    except ValueError:
        choices = ", ".join(k.value for k in ClusterKind)
        raise InvalidInput(f"kind must be one of {choices}, not {spec.kind!r}") from None
    master_url = _master_url(kind, spec.master_url)
    required = kind == ClusterKind.STANDALONE
    rest_url = _http_url(
        spec.rest_url, "rest_url", required=required or kind == ClusterKind.YARN, kind=kind
    )
    ui_url = _http_url(spec.ui_url, "ui_url", required=required, kind=kind)
    if kind == ClusterKind.YARN and not ui_url:
        ui_url = rest_url
    hadoop_conf_dir = _conf_dir(spec.hadoop_conf_dir, required=kind == ClusterKind.YARN, kind=kind)
    for name in LIMIT_FIELDS:
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LIMIT:
            raise InvalidInput(f"{name} must be a whole number from 0 (unlimited) to {MAX_LIMIT}")
    return replace(
        spec,
        kind=kind,
        storage_root=storage.normalise_root(spec.storage_root),
        master_url=master_url,
        rest_url=rest_url,
        ui_url=ui_url,
        az=_label(spec.az, "az"),
        cloud=_label(spec.cloud, "cloud"),
        hadoop_conf_dir=hadoop_conf_dir,
    )


def _conf_dir(path: str, *, required: bool, kind: ClusterKind) -> str:
    """A Hadoop configuration directory: an absolute path without control characters."""
    if not isinstance(path, str) or len(path) > MAX_URL_LENGTH:
        raise InvalidInput(f"hadoop_conf_dir must be a path of at most {MAX_URL_LENGTH} characters")
    if not path:
        if required:
            raise InvalidInput(f"hadoop_conf_dir is required for a {kind} cluster")
        return ""
    if not path.startswith("/") or any(unicodedata.category(c)[0] == "C" for c in path):
        raise InvalidInput(f"hadoop_conf_dir {path!r} must be an absolute path")
    return path.rstrip("/") or "/"


def _master_url(kind: ClusterKind, url: str) -> str:
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:
        raise InvalidInput(f"master_url must be a string of at most {MAX_URL_LENGTH} characters")
    if any(c.isspace() for c in url):
        raise InvalidInput(f"master_url {url!r} must not contain whitespace")
    if kind == ClusterKind.LOCAL:
        if url and not _LOCAL_MASTER.match(url):
            raise InvalidInput(
                f"master_url {url!r}: a local cluster takes local, local[N] or local[*] (or none)"
            )
        return url
    if kind == ClusterKind.YARN:
        if url not in ("", "yarn"):
            raise InvalidInput(f"master_url {url!r}: a yarn cluster takes yarn (or none)")
        return "yarn"
    if not url:
        raise InvalidInput(f"master_url is required for a {kind} cluster")
    if kind == ClusterKind.STANDALONE or url.startswith("spark://"):
        _spark_master(url)
        return url
    # spark-submit: whatever --master accepts
    if url == "yarn" or _LOCAL_MASTER.match(url) or _LOCAL_CLUSTER.match(url):
        return url
    if url.startswith("k8s://"):
        inner = url.removeprefix("k8s://")
        if not inner.startswith(("http://", "https://")):
            inner = "https://" + inner
        _http_url(inner, "master_url", required=True, kind=kind)
        return url
    if url.startswith("mesos://"):
        _host_ports(url.removeprefix("mesos://"), url)
        return url
    raise InvalidInput(
        f"master_url {url!r} is not a Spark master: use spark://host:port, yarn, "
        "k8s://https://host:port or local[N]"
    )


def _spark_master(url: str) -> None:
    if not url.startswith("spark://"):
        raise InvalidInput(f"master_url {url!r}: a standalone cluster needs spark://host:port")
    _host_ports(url.removeprefix("spark://"), url)


def _host_ports(hosts: str, url: str) -> None:
    for host_port in hosts.split(","):
        match = _HOST_PORT.match(host_port)
        if match is None or not 1 <= int(match.group(2)) <= 65535:
            raise InvalidInput(f"master_url {url!r}: {host_port!r} is not host:port")


def _http_url(url: str, what: str, *, required: bool, kind: ClusterKind) -> str:
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:
        raise InvalidInput(f"{what} must be a string of at most {MAX_URL_LENGTH} characters")
    if not url:
        if required:
            raise InvalidInput(f"{what} is required for a {kind} cluster")
        return url
    if any(c.isspace() for c in url):
        raise InvalidInput(f"{what} {url!r} must not contain whitespace")
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise InvalidInput(f"{what} {url!r} has an invalid port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(f"{what} {url!r} must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(f"{what} must not carry credentials")
    if parts.query or parts.fragment:
        raise InvalidInput(f"{what} {url!r} must not have a query or fragment")
    if port == 0:
        raise InvalidInput(f"{what} {url!r} has an invalid port")
    return url.rstrip("/")


def _label(value: str, what: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_LABEL_LENGTH:
        raise InvalidInput(f"{what} must be a string of at most {MAX_LABEL_LENGTH} characters")
    for char in value:
        if char in _LABEL_PUNCTUATION:
            continue
        category = unicodedata.category(char)
        if not (category.startswith("L") or category == "Nd"):
            raise InvalidInput(f"{what} may contain only letters, digits and '-_.' ({value!r})")
    return value


def validate_cluster_name(name: str) -> str:
    return validate_name(name, "cluster name")


def validate_group_name(name: str) -> str:
    return validate_name(name, "group name")


def check_group(primary_cluster: str, failover_cluster: str | None) -> None:
    if failover_cluster is not None and failover_cluster == primary_cluster:
        raise InvalidInput(
            f"failover_cluster must differ from primary_cluster ({primary_cluster!r})"
        )
