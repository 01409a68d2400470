"""Explicit, serializable connection settings and their loading into a kubernetes_asyncio configuration.

A cluster is reached in exactly one of two ways: "in cluster", or a kubeconfig *dict* (plus context
and namespace), never a path: cncf-kubernetes' ``AsyncKubernetesHook`` does not fall back to
in-cluster config the way the sync hook does (``AsyncKubernetesHook._load_config``, cncf-kubernetes
``hooks/kubernetes.py``), and a file of the worker may not exist where the settings are used.
``hooks.gang.GangHook`` builds them from an Airflow connection wherever it runs - the operator on the
worker, a trigger in the triggerer (its arguments carry the connection id, not credentials); plain
values (:meth:`ConnectionSettings.to_dict`) travel only where a cluster is given by explicit
settings (the ``connection`` trigger argument: tests, tools).

Authentication is not re-implemented: :func:`load_configuration` delegates to kubernetes_asyncio's
loaders, which handle client certificates, bearer tokens, ``exec`` credential plugins (GKE's
``gke-gcloud-auth-plugin``, EKS), OIDC and the in-cluster service account token.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config import incluster_config, kube_config

#: Re-reads credentials into the configuration (new exec-plugin token, rotated service account token).
CredentialReloader = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class ConnectionSettings:
    """Where and how to reach the API server.

    Fields:
        in_cluster: use the pod's service account (``KUBERNETES_SERVICE_HOST`` and the mounted token).
        kubeconfig: a whole kubeconfig as a dict (exclusive with ``in_cluster``).
        context: kubeconfig context to use; ``None`` means the kubeconfig's ``current-context``.
        namespace: default namespace for the gang's objects.
        verify_ssl: ``False`` only when the Airflow connection sets ``disable_verify_ssl``.
    """

    in_cluster: bool = False
    kubeconfig: Mapping[str, Any] | None = field(default=None, hash=False)
    context: str | None = None
    namespace: str = "default"
    verify_ssl: bool = True

    def __post_init__(self) -> None:
        if self.in_cluster == (self.kubeconfig is not None):
            raise ValueError("ConnectionSettings needs exactly one of in_cluster=True or a kubeconfig dict")

    def to_dict(self) -> dict[str, Any]:
        """Plain values for trigger serialization; :meth:`from_dict` reverses it."""
        return {
            "in_cluster": self.in_cluster,
            "kubeconfig": dict(self.kubeconfig) if self.kubeconfig is not None else None,
            "context": self.context,
            "namespace": self.namespace,
            "verify_ssl": self.verify_ssl,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConnectionSettings:
        """Rebuild settings from :meth:`to_dict` output."""
        kubeconfig = data.get("kubeconfig")
        return cls(
            in_cluster=bool(data.get("in_cluster", False)),
            kubeconfig=dict(kubeconfig) if kubeconfig is not None else None,
            context=data.get("context"),
            namespace=str(data.get("namespace") or "default"),
            verify_ssl=bool(data.get("verify_ssl", True)),
        )


async def load_configuration(settings: ConnectionSettings) -> tuple[Configuration, CredentialReloader]:
    """Build a kubernetes_asyncio ``Configuration`` from ``settings``.

    Returns the configuration and a reloader. kubernetes_asyncio runs an exec plugin only while loading,
    so a token that expires during a long wait (EKS tokens last 15 minutes; cncf-kubernetes issue
    #61737) is refreshed by calling the reloader after a 401. The loader reuses its cached exec result
    until that result's own ``expirationTimestamp``.
    """
    configuration = Configuration()
    if settings.in_cluster:
        loader = incluster_config.InClusterConfigLoader(
            token_filename=incluster_config.SERVICE_TOKEN_FILENAME,
            cert_filename=incluster_config.SERVICE_CERT_FILENAME,
            try_refresh_token=True,
        )
        loader.load_and_set(configuration)

        async def reload_in_cluster() -> None:
            loader.load_and_set(configuration)

        reloader: CredentialReloader = reload_in_cluster
    else:
        assert settings.kubeconfig is not None  # guaranteed by __post_init__
        kube_loader = kube_config.KubeConfigLoader(
            config_dict=dict(settings.kubeconfig), config_base_path=None, active_context=settings.context
        )
        await kube_loader.load_and_set(configuration)

        async def reload_kubeconfig() -> None:
            await kube_loader.load_and_set(configuration)

        reloader = reload_kubeconfig
    if not settings.verify_ssl:
        configuration.verify_ssl = False
    return configuration, reloader
