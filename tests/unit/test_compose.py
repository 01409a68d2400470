"""``docker-compose.yaml`` without a Docker engine: the checks of :mod:`tests.unit.compose_checks` find
no problem in the file and find the problem in each broken copy."""

from __future__ import annotations

import asyncio
import copy
import json
import ssl
from importlib.metadata import version
from typing import Any

import jsonschema
import pytest

from gang_sim.apiserver.server import Emulator
from tests.unit.compose_checks import (
    COMPOSE_FILE,
    SCHEMA_FILE,
    airflow_command_problems,
    airflow_services,
    commands_of,
    gang_sim_invocations,
    gang_sim_problems,
    interpolation_problems,
    load,
    option_problems,
    path_problems,
    strings,
)


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return load()


def test_the_file_is_valid_under_the_compose_specification(document: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.Draft7Validator(schema).validate(document)


def test_a_misspelt_service_key_breaks_the_schema(document: dict[str, Any]) -> None:
    broken = copy.deepcopy(document)
    broken["services"]["airflow-scheduler"]["comand"] = ["scheduler"]
    with pytest.raises(jsonschema.ValidationError, match="comand"):
        jsonschema.Draft7Validator(json.loads(SCHEMA_FILE.read_text())).validate(broken)


def test_the_components_are_separate_services_sharing_one_anchor(document: dict[str, Any]) -> None:
    services = airflow_services(document)
    commands = {name: service["command"] for name, service in services.items() if name != "airflow-init"}
    assert sorted(map(tuple, commands.values())) == [
        ("api-server",),
        ("dag-processor",),
        ("scheduler",),
        ("triggerer",),
    ]
    assert "x-airflow-common" in document and "&airflow-common" in COMPOSE_FILE.read_text()
    assert {service["image"] for service in services.values()} == {document["x-airflow-common"]["image"]}
    init = document["services"]["airflow-init"]
    assert ["airflow", "db", "migrate"] in list(commands_of(init))
    depends = {name: set(service.get("depends_on") or {}) for name, service in services.items()}
    assert all(depends[name] >= {"postgres", "gang-sim", "airflow-init"} for name in commands)
    assert document["services"]["postgres"]["image"].startswith("postgres:")
    assert "healthcheck" in document["services"]["postgres"]


def test_the_image_is_the_airflow_these_checks_run_with(document: dict[str, Any]) -> None:
    tag = document["x-airflow-common"]["image"].split(":")[1]
    assert tag.split("-")[0] == version("apache-airflow")


def test_every_airflow_command_is_one_of_the_airflow_cli(document: dict[str, Any]) -> None:
    assert airflow_command_problems(document) == []


def test_a_misspelt_airflow_command_is_found(document: dict[str, Any]) -> None:
    broken = copy.deepcopy(document)
    broken["services"]["airflow-triggerer"]["command"] = ["trigerer"]
    broken["services"]["airflow-init"]["command"][2] = "airflow db migrat\n"
    problems = airflow_command_problems(broken)
    assert [problem.split(":")[0] for problem in problems] == ["airflow-init", "airflow-triggerer"], problems


def test_gang_sim_serve_parses_binds_the_service_name_and_shares_its_kubeconfig(document: dict[str, Any]) -> None:
    assert gang_sim_problems(document) == []


@pytest.mark.parametrize(
    "change",
    [
        ("--time-scale 1", "--time-scale 0"),
        ("--host gang-sim", "--hostname gang-sim"),
        ("--host gang-sim", "--host 0.0.0.0"),
        ("--scenario demo", "--scenario no-such"),
        ("ghcr.io/example/ddp-trainer:*", "ghcr.io/example/other:*"),
    ],
)
def test_a_broken_gang_sim_command_is_found(change: tuple[str, str]) -> None:
    text = COMPOSE_FILE.read_text()
    assert change[0] in text
    assert gang_sim_problems(load(text.replace(change[0], change[1]))) != []


def test_the_emulator_certificate_verifies_for_the_service_name(document: dict[str, Any]) -> None:
    """``gang-sim serve --host gang-sim`` serves a certificate for that name: a client that connects
    as the other containers do (``https://gang-sim:6443``) verifies it. Bound to 127.0.0.1 here, the
    name being served by the compose network only."""
    ((_, arguments),) = gang_sim_invocations(document)
    host = arguments[arguments.index("--host") + 1]

    async def handshake() -> str:
        emulator = Emulator(host=host, port=0)
        emulator.host = "127.0.0.1"
        await emulator.start()
        try:
            context = ssl.create_default_context(cadata=(emulator.ca_pem or b"").decode())
            port = int(emulator.url.rsplit(":", 1)[1])
            _, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=host), 10
            )
            protocol = str(writer.get_extra_info("ssl_object").version())
            writer.close()
            await writer.wait_closed()
            return protocol
        finally:
            await emulator.stop()

    assert asyncio.run(handshake()).startswith("TLS")


def test_every_mounted_path_exists_and_the_dags_are_where_both_sides_look(document: dict[str, Any]) -> None:
    assert path_problems(document) == []


def test_a_missing_host_path_is_found(document: dict[str, Any]) -> None:
    broken = copy.deepcopy(document)
    broken["services"]["gang-sim"]["volumes"][1] = "./dag:/opt/airflow/dags:ro"
    assert len(path_problems(broken)) >= 2


def test_every_airflow_variable_names_a_real_option(document: dict[str, Any]) -> None:
    assert option_problems(document) == []


def test_an_unknown_option_is_found(document: dict[str, Any]) -> None:
    broken = copy.deepcopy(document)
    broken["services"]["airflow-scheduler"]["environment"]["AIRFLOW__CORE__DAG_FOLDER"] = "/x"
    assert option_problems(broken) == ["airflow-scheduler: AIRFLOW__CORE__DAG_FOLDER: no option [core] dag_folder"]


def test_the_fernet_key_is_one(document: dict[str, Any]) -> None:
    from cryptography.fernet import Fernet

    key = document["x-airflow-common"]["environment"]["AIRFLOW__CORE__FERNET_KEY"]
    assert Fernet(key).decrypt(Fernet(key).encrypt(b"x")) == b"x"


def test_dollars_are_escaped_except_the_interpolated_user_id(document: dict[str, Any]) -> None:
    assert interpolation_problems("\n".join(strings(document))) == []
    assert interpolation_problems('command: "$@ ${HOME} ${AIRFLOW_UID:-50000} $$x"') == ["$@", "${HOME}"]
