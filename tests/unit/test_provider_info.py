"""Provider discovery: the entry point resolves and its metadata is what Airflow validates."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distribution, entry_points
from pathlib import Path


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


def test_provider_info_is_valid_for_airflow_s_schema() -> None:
    import json

    import airflow
    import jsonschema

    from airflow_provider_gang.get_provider_info import get_provider_info

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_the_description_names_every_reservation_mode() -> None:
    from airflow_provider_gang.get_provider_info import get_provider_info

    description = get_provider_info()["description"]
    for mode in ("ProvisioningRequest", "scheduling gates", "Kueue", "Workload API", "auto"):
        assert mode in description


def test_every_module_and_class_it_names_imports() -> None:
    from importlib import import_module

    from airflow_provider_gang.decorators.gang import gang_task
    from airflow_provider_gang.get_provider_info import get_provider_info

    info = get_provider_info()
    integrations = {item["integration-name"] for item in info["integrations"]}
    for section in ("triggers", "operators", "hooks"):
        for entry in info[section]:
            assert entry["integration-name"] in integrations
            for module in entry["python-modules"]:
                import_module(module)
    ((decorator),) = info["task-decorators"]
    module, _, name = decorator["class-name"].rpartition(".")
    assert decorator["name"] == "gang" and getattr(import_module(module), name) is gang_task


def test_the_config_section_is_the_deployment_record() -> None:
    from airflow_provider_gang.get_provider_info import get_provider_info
    from airflow_provider_gang.reservation import deployment

    options = get_provider_info()["config"]["gang"]["options"]
    assert {name: option["default"] for name, option in options.items()} == {
        option.name: str(option.default) for option in deployment.OPTIONS
    }


def test_airflow_knows_the_gang_section_and_task_gang() -> None:
    """Airflow's provider discovery loads the section's defaults (``airflow config get-value``) and
    registers ``@task.gang``, in a fresh process."""
    code = (
        "from airflow.providers_manager import ProvidersManager as P; m = P();"
        "print(m.taskflow_decorators['gang'].__name__);"
        "print(dict(m.provider_configs)['airflow-provider-gang']['gang']['options']['client_retry_attempts']['default'])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.strip().splitlines()[-2:] == ["gang_task", "10"]
