"""Kueue API versions: v1beta2 only by default (Kueue 0.20), v1beta1 too on request (Kueue <= 0.19)."""

from __future__ import annotations

import pytest
from kubernetes import client, config

from gang_sim.cli import build_parser
from gang_sim.testing import ClusterHarness

KUEUE = "kueue.x-k8s.io"


def discovered(serve_kueue_v1beta1: bool) -> tuple[list[str], int, int]:
    """Kueue's discovered versions, and the codes of a v1beta1 and a v1beta2 LIST."""
    with ClusterHarness(seed=0, serve_kueue_v1beta1=serve_kueue_v1beta1) as harness:
        api = config.new_client_from_config(str(harness.kubeconfig_path))
        try:
            group = next(g for g in client.ApisApi(api).get_api_versions().groups if g.name == KUEUE)
            codes = []
            for version in ("v1beta1", "v1beta2"):
                try:
                    client.CustomObjectsApi(api).list_cluster_custom_object(KUEUE, version, "clusterqueues")
                    codes.append(200)
                except client.ApiException as error:
                    codes.append(error.status)
            return [item.version for item in group.versions], codes[0], codes[1]
        finally:
            api.close()


def test_only_v1beta2_is_served_by_default():
    assert discovered(False) == (["v1beta2"], 404, 200)


def test_the_option_serves_v1beta1_beside_the_preferred_v1beta2():
    assert discovered(True) == (["v1beta2", "v1beta1"], 200, 200)


@pytest.mark.parametrize(("argv", "expected"), [([], False), (["--serve-kueue-v1beta1"], True)])
def test_gang_sim_serve_has_the_option(argv, expected, tmp_path):
    args = build_parser().parse_args(["serve", "--kubeconfig-out", str(tmp_path / "k"), *argv])
    assert args.serve_kueue_v1beta1 is expected
