"""The built kubectl against one control plane: run, server-side apply, get as JSON, wait for CRDs.

The harness installs through kubectl what an operator of a cluster would (the ProvisioningRequest and
Kueue CRDs, Kueue's webhook configurations, the scenario's nodes and objects), so the objects go
through the same client-side processing they get in a real install. Its discovery cache sits in the
control plane's directory, so two control planes never share one.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gang_sim.testing.eventually import eventually

TIMEOUT_SECONDS = 60
"""Longest run of one kubectl command."""
FIELD_MANAGER = "gang-real-cluster"


def is_established(definition: dict[str, Any]) -> bool:
    """Whether a CustomResourceDefinition's ``Established`` condition is True (none yet: not)."""
    conditions = (definition.get("status") or {}).get("conditions") or []
    return any(item.get("type") == "Established" and item.get("status") == "True" for item in conditions)


@dataclass(frozen=True)
class Kubectl:
    """``binary`` with ``kubeconfig``, its discovery cache in ``cache_directory``."""

    binary: Path
    kubeconfig: Path
    cache_directory: Path

    def run(self, *arguments: str, input_text: str | None = None, check: bool = True) -> str:
        """Its standard output; ``check``: a non-zero exit raises ``RuntimeError`` with its standard error."""
        command = [str(self.binary), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_directory)]
        result = subprocess.run(
            [*command, *arguments],
            input=input_text,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(arguments)} failed: {result.stderr.strip()}")
        return result.stdout

    def apply(self, documents: Sequence[dict[str, Any]]) -> None:
        """Server-side apply ``documents`` (force: the harness owns what it installs)."""
        if documents:
            self.run(
                "apply",
                "--server-side",
                "--force-conflicts",
                f"--field-manager={FIELD_MANAGER}",
                "-f",
                "-",
                input_text=yaml.safe_dump_all(list(documents), sort_keys=False),
            )

    def get(self, resource: str, name: str = "", namespace: str | None = None) -> Any:
        """``kubectl get -o json`` as a dict (a List when ``name`` is empty)."""
        arguments = ["get", resource, *([name] if name else []), "-o", "json"]
        arguments += ["-n", namespace] if namespace else (["-A"] if not name else [])
        return json.loads(self.run(*arguments))

    def wait_established(self, names: Sequence[str] = (), timeout: float = 60.0) -> None:
        """Until the CustomResourceDefinitions ``names`` (all of them when empty) exist and are Established.

        Not ``kubectl wait --for=condition=Established``: it fails at once on a definition the
        apiextensions controllers have not yet given conditions (``status.conditions: null`` just after
        the create, ``k8s.io/apiextensions-apiserver pkg/apis/apiextensions/v1/types.go``; the same
        failure in pingcap/tidb-operator#1511), which loses the race under load.
        """

        def all_established() -> bool:
            definitions = {item["metadata"]["name"]: item for item in self.get("customresourcedefinitions")["items"]}
            return all(is_established(definitions.get(name, {})) for name in names or definitions)

        what = f"CustomResourceDefinitions Established: {', '.join(names) or 'all'}"
        eventually(all_established, timeout=timeout, what=what, interval=0.5)
