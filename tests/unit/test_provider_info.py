"""Provider discovery: the entry point resolves and its metadata is what Airflow validates."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distribution, entry_points


def test_entry_point_resolves_to_provider_info() -> None:
    providers = entry_points(group="apache_airflow_provider")
    (entry,) = [ep for ep in providers if ep.value.startswith("airflow_provider_gang")]
    info = entry.load()()
    assert info["package-name"] == distribution("airflow-provider-gang").metadata["Name"]
    assert info["name"] and info["description"]


def test_provider_info_module_imports_no_airflow() -> None:
    code = (
        "import sys; import airflow_provider_gang.get_provider_info as m; m.get_provider_info();"
        "print(any(name == 'airflow' or name.startswith('airflow.') for name in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "False"
