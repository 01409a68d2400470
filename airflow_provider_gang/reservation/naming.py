"""Deterministic names and labels for the objects of a gang.

Kubernetes rules followed here (``k8s.io/apimachinery/pkg/util/validation``):

- object names are DNS-1123 subdomains (<= 253 chars), pods' hostnames and most names we build are
  DNS-1123 labels (<= 63, ``[a-z0-9]([-a-z0-9]*[a-z0-9])?``); a Service name is a DNS-1035 label
  (must also start with a letter), so gang names always start with a letter;
- label values are <= 63 chars of ``[A-Za-z0-9_.-]``, starting and ending alphanumeric.

A gang name is derived from dag, task, run, map index and attempt: a readable prefix, the attempt,
and a hash of all inputs, e.g. ``train-llm-fit-t2-3f9c01ab``. The attempt is part of the name because
a ProvisioningRequest spec is immutable, so each try needs a new object (Kueue names its requests
``<workload>-<check>-<attempt>`` for the same reason). Names are at most :data:`GANG_NAME_MAX` chars so
``<gang>-<rank>`` stays a valid DNS label for up to 10^11 members.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

LABEL_PREFIX = "airflow-gang.io"
"""Domain of every label, annotation and scheduling gate this provider writes."""

GANG_LABEL = f"{LABEL_PREFIX}/gang"
"""Every object of a gang carries it, valued with the gang name: the watch selector."""
ROLE_LABEL = f"{LABEL_PREFIX}/role"
"""``owner``, ``reservation``, ``member`` or ``rendezvous``."""
RANK_LABEL = f"{LABEL_PREFIX}/rank"
"""Member pods launched by us carry their rank."""
SPOT_LABEL = f"{LABEL_PREFIX}/spot"
"""``"true"`` on members placed on spot capacity, whatever the cloud's own spot label (``reservation.cloud``)."""
RESERVED_LABELS = frozenset({GANG_LABEL, ROLE_LABEL, RANK_LABEL, SPOT_LABEL})

GANG_NAME_MAX = 50
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
HASH_LENGTH = 8

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_NOT_LABEL_VALUE = re.compile(r"[^A-Za-z0-9_.-]+")


def is_dns_label(text: str) -> bool:
    """DNS-1123 label: lower-case alphanumerics and ``-``, <= 63 chars, alphanumeric at both ends."""
    return len(text) <= DNS_LABEL_MAX and _DNS_LABEL.match(text) is not None


def is_dns_1035_label(text: str) -> bool:
    """DNS-1035 label (Service names): a DNS-1123 label that starts with a letter."""
    return len(text) <= DNS_LABEL_MAX and _DNS_1035_LABEL.match(text) is not None


def is_dns_subdomain(text: str) -> bool:
    """DNS-1123 subdomain: dot-separated labels, <= 253 chars in total."""
    return len(text) <= DNS_SUBDOMAIN_MAX and _DNS_SUBDOMAIN.match(text) is not None


def is_label_value(text: str) -> bool:
    """Label value: empty, or <= 63 chars of ``[A-Za-z0-9_.-]`` with alphanumeric ends."""
    return len(text) <= LABEL_VALUE_MAX and _LABEL_VALUE.match(text) is not None


def is_qualified_name(text: str) -> bool:
    """Label key / annotation key / gate name: ``[prefix/]name``, prefix a DNS subdomain, name <= 63."""
    prefix, slash, name = text.rpartition("/")
    if slash and not is_dns_subdomain(prefix):
        return False
    return len(name) <= DNS_LABEL_MAX and _QUALIFIED_NAME_PART.match(name) is not None


def short_hash(*parts: object, length: int = HASH_LENGTH) -> str:
    """Stable hex digest of ``parts`` (sha256, first ``length`` chars); never depends on the process."""
    digest = hashlib.sha256("\x1f".join(str(part) for part in parts).encode()).hexdigest()
    return digest[:length]


def to_dns_label(text: str, *, max_length: int = DNS_LABEL_MAX) -> str:
    """Lower-case ``text`` and squeeze it into a DNS-1123 label of at most ``max_length`` chars.

    Characters outside ``[a-z0-9-]`` become ``-``; runs of ``-`` collapse. May return ``""``.
    """
    cleaned = _NOT_DNS.sub("-", text.lower())
    cleaned = re.sub("-{2,}", "-", cleaned).strip("-")
    return cleaned[:max_length].rstrip("-")


def label_value(text: str) -> str:
    """A valid label value for ``text``: itself when valid, otherwise a cleaned, truncated form with a
    hash suffix so distinct long inputs stay distinct (run ids are often longer than 63 chars)."""
    if is_label_value(text):
        return text
    cleaned = _NOT_LABEL_VALUE.sub("-", text).strip("-_.")
    suffix = short_hash(text)
    head = cleaned[: LABEL_VALUE_MAX - len(suffix) - 1].rstrip("-_.")
    return f"{head}-{suffix}" if head else suffix


def gang_name(dag_id: str, task_id: str, run_id: str, *, map_index: int = -1, attempt: int = 1) -> str:
    """The deterministic name of one try of a gang (a DNS-1035 label of <= :data:`GANG_NAME_MAX` chars).

    The same inputs always give the same name, so a worker that restarts adopts the objects it
    created before; a new ``attempt`` gives a new name. ``map_index`` is ``-1`` for unmapped tasks.
    """
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1, got {attempt}")
    digest = short_hash(dag_id, task_id, run_id, map_index, attempt)
    mapped = f"-m{map_index}" if map_index >= 0 else ""
    tail = f"{mapped}-t{attempt}-{digest}"
    readable = to_dns_label(f"{dag_id}-{task_id}", max_length=GANG_NAME_MAX - len(tail))
    if not readable or not readable[0].isalpha():
        readable = f"g-{readable}".rstrip("-")[: GANG_NAME_MAX - len(tail)].rstrip("-")
    return f"{readable}{tail}"


TRY_HISTORY_ROLE = "try-history"
"""``ROLE_LABEL`` of a try history ConfigMap, where a task instance's tries are kept on Airflow 3.1 and
3.2 (gang objects are ``owner``, ``member``...)."""


def try_history_name(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The try history ConfigMap's name: readable dag and task, a hash of the whole task instance."""
    digest = short_hash("try-history", dag_id, task_id, run_id, map_index)
    tail = f"-tries-{digest}"
    readable = to_dns_label(f"{dag_id}-{task_id}", max_length=DNS_LABEL_MAX - len(tail))
    return f"{readable or 'gang'}{tail}"


def run_labels(dag_id: str, task_id: str, run_id: str, *, map_index: int = -1, attempt: int = 1) -> dict[str, str]:
    """Labels tracing objects back to the Airflow task instance (values made label-safe)."""
    labels = {
        f"{LABEL_PREFIX}/dag-id": label_value(dag_id),
        f"{LABEL_PREFIX}/task-id": label_value(task_id),
        f"{LABEL_PREFIX}/run-id": label_value(run_id),
        f"{LABEL_PREFIX}/try-number": str(attempt),
    }
    if map_index >= 0:
        labels[f"{LABEL_PREFIX}/map-index"] = str(map_index)
    return labels


@dataclass(frozen=True)
class GangNames:
    """Names of every object of the gang ``gang`` (one try). Kinds differ, so names may repeat."""

    gang: str

    @property
    def owner(self) -> str:
        """The ConfigMap that owns every other object (deleting it garbage-collects the gang)."""
        return self.gang

    @property
    def pod_template(self) -> str:
        return self.gang

    @property
    def provisioning_request(self) -> str:
        return self.gang

    @property
    def job(self) -> str:
        return self.gang

    @property
    def pod_group(self) -> str:
        return self.gang

    @property
    def service(self) -> str:
        """Headless Service for rendezvous; also each member's ``subdomain``."""
        return self.gang

    @property
    def scheduling_gate(self) -> str:
        """The gang-specific scheduling gate held by gated members until the reservation is granted."""
        return f"{LABEL_PREFIX}/{self.gang}"

    def member(self, rank: int) -> str:
        """Pod name (and hostname) of member ``rank``."""
        return f"{self.gang}-{rank}"
