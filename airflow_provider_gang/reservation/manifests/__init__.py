"""Manifest builders for every object of a gang (plain dicts, wire format), in creation order:

1. ``owner.owner_config_map`` - then pass its ``metadata.uid`` as ``owner_uid`` to all the others;
2. ``provisioning.pod_template`` then ``provisioning.provisioning_request`` (modes
   ``provisioning_request`` and ``gates``), or ``kueue.job`` / ``pods.pod_group_pod`` (``kueue``),
   or ``pod_group.pod_group`` (``workload``);
3. ``service.headless_service`` (when members rendezvous);
4. ``pods.gated_pod`` (``gates``, before the reservation is granted) or ``pods.launch_pod`` (after),
   or ``pod_group.member_pod`` (``workload``, right after its PodGroup);
   ``world.world_config_map`` (``kueue`` with ``min_size < size``, once Kueue admitted the Workload:
   the admitted member count the members' size variables read).

Builders are pure and deterministic: the same spec gives the same manifests, so creating them again
after a crash is an idempotent "create or adopt".
"""

from airflow_provider_gang.reservation.manifests import (
    common,
    kueue,
    owner,
    pod_group,
    pods,
    provisioning,
    rank_env,
    service,
    world,
)

__all__ = ["common", "kueue", "owner", "pod_group", "pods", "provisioning", "rank_env", "service", "world"]
