"""Discovery, OpenAPI, authentication (401), per-user rules (403) and SelfSubjectAccessReview."""

from __future__ import annotations

import json

import pytest
import urllib3
from kubernetes import client, config

from gang_sim.apiserver.http.auth import Rule

from .conftest import Cluster, require_version, status_of


def test_core_discovery_reports_group_version_v1_and_subresources(cluster: Cluster):
    status, body = cluster.raw("GET", "/api/v1")
    assert status == 200 and body["groupVersion"] == "v1"
    names = {r["name"] for r in body["resources"]}
    assert {
        "pods",
        "pods/status",
        "pods/log",
        "namespaces",
        "configmaps",
        "services",
        "events",
        "nodes",
        "podtemplates",
    } <= names
    pods = next(r for r in body["resources"] if r["name"] == "pods")
    assert pods["kind"] == "Pod" and pods["namespaced"] and "watch" in pods["verbs"]


def test_group_discovery_lists_crd_versions(cluster: Cluster):
    status, body = cluster.raw("GET", "/apis")
    assert status == 200
    groups = {g["name"]: [v["version"] for v in g["versions"]] for g in body["groups"]}
    assert {"v1", "v1beta1"} <= set(groups["autoscaling.x-k8s.io"])
    assert groups["autoscaling.x-k8s.io"][0] == "v1" and groups["batch"][0] == "v1"
    status, body = cluster.raw("GET", "/apis/autoscaling.x-k8s.io/v1")
    assert status == 200 and {"provisioningrequests", "provisioningrequests/status"} <= {
        r["name"] for r in body["resources"]
    }


def test_kubectl_api_resources(cluster: Cluster):
    result = cluster.kubectl("api-resources", "-o", "name")
    assert result.returncode == 0, result.stderr
    assert {"pods", "jobs.batch", "provisioningrequests.autoscaling.x-k8s.io"} <= set(result.stdout.split())


def test_openapi_v3_declares_field_validation(cluster: Cluster):
    require_version(cluster, 27, "OpenAPI v3 with server-side field validation")
    status, index = cluster.raw("GET", "/openapi/v3")
    assert status == 200 and "apis/autoscaling.x-k8s.io/v1" in index["paths"]
    status, document = cluster.raw("GET", index["paths"]["api/v1"]["serverRelativeURL"])
    assert status == 200
    post = document["paths"]["/api/v1/namespaces/{namespace}/pods"]["post"]
    assert "fieldValidation" in {p["name"] for p in post["parameters"]}
    assert post["x-kubernetes-group-version-kind"]["kind"] == "Pod"


def test_an_unknown_token_is_401(cluster: Cluster):
    """Credentials that fail are 401 whether or not the server lets anonymous requests in (those carry none)."""
    configuration = cluster.api.configuration
    pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=configuration.ssl_ca_cert)  # no client certificate
    response = pool.request(
        "GET", configuration.host + "/api/v1/namespaces", headers={"Authorization": "Bearer not-a-token"}, timeout=10.0
    )
    pool.clear()
    body = json.loads(response.data)
    assert (response.status, body["reason"], body["message"]) == (401, "Unauthorized", "Unauthorized")


def test_a_missing_permission_is_403_and_self_subject_access_review_agrees(cluster: Cluster, namespace):
    kubeconfig = cluster.add_user("reader", [Rule(("get", "list", "watch"), ("",), ("pods",))])
    api = config.new_client_from_config(str(kubeconfig))
    try:
        core = client.CoreV1Api(api)
        assert core.list_namespaced_pod(namespace).items == []
        with pytest.raises(client.ApiException) as raised:
            core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
        status = status_of(raised.value)
        assert raised.value.status == 403 and status["reason"] == "Forbidden"
        assert status["message"] == (
            f'configmaps is forbidden: User "reader" cannot create resource "configmaps" in API group "" '
            f'in the namespace "{namespace}"'
        )
        reviews = client.AuthorizationV1Api(api)

        def allowed(verb: str, resource: str, subresource: str = "") -> bool:
            review = reviews.create_self_subject_access_review(
                {
                    "spec": {
                        "resourceAttributes": {
                            "namespace": namespace,
                            "verb": verb,
                            "group": "",
                            "resource": resource,
                            "subresource": subresource,
                        }
                    }
                }
            )
            return bool(review.status.allowed)

        assert allowed("list", "pods") and not allowed("create", "configmaps") and not allowed("get", "pods", "log")
    finally:
        api.close()
    can_i = cluster.kubectl("auth", "can-i", "delete", "pods", "-n", namespace, kubeconfig=kubeconfig)
    assert can_i.stdout.strip() == "no"
    can_list = cluster.kubectl("auth", "can-i", "list", "pods", "-n", namespace, kubeconfig=kubeconfig)
    assert can_list.stdout.strip() == "yes", can_list.stderr


def test_every_authenticated_user_may_create_self_subject_access_reviews(cluster: Cluster, namespace):
    # Upstream's system:basic-user ClusterRole (bound to system:authenticated) grants this to every user;
    # the review's answers still follow the user's own rules.
    kubeconfig = cluster.add_user("nobody-in-particular", [])
    api = config.new_client_from_config(str(kubeconfig))
    try:
        with pytest.raises(client.ApiException) as raised:
            client.CoreV1Api(api).list_namespaced_pod(namespace)
        assert raised.value.status == 403
        reviews = client.AuthorizationV1Api(api)

        def review(verb: str, group: str, resource: str) -> bool:
            attributes = {"namespace": namespace, "verb": verb, "group": group, "resource": resource}
            answer = reviews.create_self_subject_access_review({"spec": {"resourceAttributes": attributes}})
            return bool(answer.status.allowed)

        assert not review("list", "", "pods")
        assert review("create", "authorization.k8s.io", "selfsubjectaccessreviews")
    finally:
        api.close()
    can_i = cluster.kubectl("auth", "can-i", "get", "pods", "-n", namespace, kubeconfig=kubeconfig)
    assert can_i.stdout.strip() == "no", can_i.stderr


def test_resource_names_cover_requests_naming_the_object_and_a_watch_by_metadata_name(cluster: Cluster, namespace):
    """RBAC ``resourceNames``: a GET of the named object and a WATCH with ``fieldSelector=metadata.name=``
    of it are allowed (the request's name is the selector's, upstream ``requestinfo.go``); a LIST or WATCH of
    the collection is not, and a SelfSubjectAccessReview with and without the name agrees."""
    kubeconfig = cluster.add_user("named", [Rule(("get", "list", "watch"), ("",), ("configmaps",), names=("only",))])
    api = config.new_client_from_config(str(kubeconfig))
    try:
        core = client.CoreV1Api(api)
        with pytest.raises(client.ApiException) as listed:
            core.list_namespaced_config_map(namespace)
        assert listed.value.status == 403
        with pytest.raises(client.ApiException) as watched:
            core.list_namespaced_config_map(namespace, watch=True, timeout_seconds=1, _preload_content=False)
        assert watched.value.status == 403
        one = core.list_namespaced_config_map(
            namespace, watch=True, field_selector="metadata.name=only", timeout_seconds=1, _preload_content=False
        )
        assert one.status == 200
        one.release_conn()
        with pytest.raises(client.ApiException) as other:
            core.read_namespaced_config_map("other", namespace)
        assert other.value.status == 403
        reviews = client.AuthorizationV1Api(api)

        def allowed(name: str) -> bool:
            attributes = {"namespace": namespace, "verb": "watch", "group": "", "resource": "configmaps"}
            review = reviews.create_self_subject_access_review(
                {"spec": {"resourceAttributes": attributes | ({"name": name} if name else {})}}
            )
            return bool(review.status.allowed)

        assert allowed("only") and not allowed("") and not allowed("other")
    finally:
        api.close()
