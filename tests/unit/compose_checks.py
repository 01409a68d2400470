"""``docker-compose.yaml`` is checked without a Docker engine: its shape and everything it names.

- The file validates against the Compose Specification's JSON schema (``tests/data/compose-spec.json``,
  vendored from https://github.com/compose-spec/compose-spec/blob/main/schema/compose-spec.json;
  provenance in ``tests/data/compose-spec.md``).
- Every ``airflow ...`` it runs (a service's command as the official image's entrypoint runs it, each
  line of a ``bash -c`` script, each shell healthcheck) parses with Airflow's own CLI parser
  (``airflow.cli.cli_parser.get_parser``, https://airflow.apache.org/docs/apache-airflow/stable/cli-and-env-variables-ref.html).
- ``gang-sim serve ...`` parses with the emulator's parser (which also loads the scenario), runs the
  example DAG's trainer image as local processes, binds the host name the other containers use, and
  the certificate it makes verifies for that name.
- Every bind-mounted host path exists in the checkout; container paths it names (a scenario file,
  the DAGs folder, the kubeconfig) lie on the mounts that hold them.
- Every ``AIRFLOW__SECTION__KEY`` is an option of Airflow's configuration description
  (https://airflow.apache.org/docs/apache-airflow/stable/configurations-ref.html), the Fernet key is
  one, and the image is the Airflow version these checks run with.
- ``$`` is escaped as ``$$`` except for the one interpolated variable, ``AIRFLOW_UID``
  (https://docs.docker.com/reference/compose-file/interpolation/).

Each check returns its problems; ``tests/unit/test_compose.py`` asserts none for the file and some
for a broken copy.
"""

from __future__ import annotations

import ast
import contextlib
import fnmatch
import io
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from gang_sim import cli as gang_sim_cli
from gang_sim.world.scenario import named_scenarios

REPOSITORY = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPOSITORY / "docker-compose.yaml"
SCHEMA_FILE = REPOSITORY / "tests" / "data" / "compose-spec.json"
AIRFLOW_IMAGE = "apache/airflow"
INTERPOLATED = {"AIRFLOW_UID"}
"""Variables Compose substitutes from the user's environment; every other ``$`` must be ``$$``."""
SEPARATORS = {"&&", "||", ";", "|", "&"}
REDIRECTIONS = {">", ">>", "<"}


def load(text: str | None = None) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text() if text is None else text)
    return document


def is_airflow_image(service: dict[str, Any]) -> bool:
    return str(service.get("image", "")).startswith(AIRFLOW_IMAGE + ":")


def airflow_services(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: service for name, service in document["services"].items() if is_airflow_image(service)}


def strings(value: Any) -> Iterator[str]:
    """Every string in a loaded YAML value (keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def unescape(text: str) -> str:
    """What the container receives: Compose turns ``$$`` into ``$``."""
    return text.replace("$$", "$")


def simple_commands(script: str) -> Iterator[list[str]]:
    """The words of each simple command of a shell script (a leading ``exec`` and redirections dropped)."""
    for line in unescape(script).replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        words: list[str] = []
        for token in [*lexer, ";"]:
            if token not in SEPARATORS:
                words.append(token)
                continue
            words = words[1:] if words[:1] == ["exec"] else words
            redirected = {
                index + offset for index, word in enumerate(words) if word in REDIRECTIONS for offset in (0, 1)
            }
            if words:
                yield [word for index, word in enumerate(words) if index not in redirected]
            words = []


def commands_of(service: dict[str, Any]) -> Iterator[list[str]]:
    """Every command line a service runs: its command (through the official entrypoint for Airflow
    images: a first word that is not ``bash``/``python`` is an ``airflow`` subcommand), the scripts
    of ``bash -c`` entrypoints and commands, and its healthcheck."""
    for key in ("entrypoint", "command"):
        value = service.get(key)
        if value is None:
            continue
        words = shlex.split(value) if isinstance(value, str) else [str(word) for word in value]
        if "-c" in words[:3] and words[0].endswith("bash"):
            yield from simple_commands(words[words.index("-c") + 1])
        elif key == "command" and is_airflow_image(service) and words[0] != "python":
            yield ["airflow", *words]
        else:
            yield words
    test = (service.get("healthcheck") or {}).get("test") or []
    if test and test[0] == "CMD-SHELL":
        yield from simple_commands(test[1])
    elif test and test[0] == "CMD":
        yield [unescape(str(word)) for word in test[1:]]


def parse_quietly(parser: Any, arguments: list[str]) -> str | None:
    """None if ``parser`` accepts ``arguments``, else what it printed."""
    output = io.StringIO()
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            parser.parse_args(arguments)
    except SystemExit as exit_:
        return f"exit {exit_.code}: {output.getvalue()[-400:]}"
    return None


def airflow_command_problems(document: dict[str, Any]) -> list[str]:
    from airflow.cli.cli_parser import get_parser

    parser = get_parser()
    problems, seen = [], 0
    for name, service in document["services"].items():
        for words in commands_of(service):
            if words[0] != "airflow":
                continue
            seen += 1
            error = parse_quietly(parser, words[1:])
            if error is not None:
                problems.append(f"{name}: {shlex.join(words)}: {error}")
    return problems if seen else ["no airflow command found"]


def gang_sim_invocations(document: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [
        (name, words[1:])
        for name, service in document["services"].items()
        for words in commands_of(service)
        if words[0] == "gang-sim"
    ]


def container_to_host(service: dict[str, Any], container_path: str) -> Path | None:
    """The checkout path a bind mount of ``service`` puts at ``container_path`` (None: not on a bind mount)."""
    target = PurePosixPath(service.get("working_dir", "/"), container_path)
    for volume in service.get("volumes", []):
        source, mount, *_ = str(volume).split(":")
        if source.startswith((".", "/")) and (target == PurePosixPath(mount) or PurePosixPath(mount) in target.parents):
            return REPOSITORY / source / target.relative_to(mount)
    return None


def named_volume_of(service: dict[str, Any], container_path: str) -> str | None:
    for volume in service.get("volumes", []):
        source, mount, *_ = volume.split(":")
        if not source.startswith((".", "/")) and PurePosixPath(mount) in PurePosixPath(container_path).parents:
            return str(source)
    return None


def gang_sim_problems(document: dict[str, Any]) -> list[str]:
    invocations = gang_sim_invocations(document)
    if len(invocations) != 1:
        return [f"expected one gang-sim command, found {invocations}"]
    name, arguments = invocations[0]
    service = document["services"][name]
    parser = gang_sim_cli.build_parser()
    problems: list[str] = []
    if arguments[:1] != ["serve"]:
        return [f"gang-sim {arguments}: not serve"]
    scenario = arguments[arguments.index("--scenario") + 1] if "--scenario" in arguments else None
    if scenario is not None and scenario not in named_scenarios():
        host_path = container_to_host(service, scenario)
        if host_path is None or not host_path.is_file():
            problems.append(f"scenario {scenario} is not a file of the checkout ({host_path})")
        else:
            arguments = [host_path.as_posix() if word == scenario else word for word in arguments]
    error = parse_quietly(parser, arguments)
    if error is not None:
        return [*problems, f"gang-sim {shlex.join(arguments)}: {error}"]
    parsed = parser.parse_args(arguments)
    running = gang_sim_cli.scenario_of(parsed)
    patterns = () if running is None else running.local_process_images
    if not any(fnmatch.fnmatchcase(trainer_image(), pattern) for pattern in patterns):
        problems.append(f"the example DAG's image {trainer_image()} is not run as local processes ({patterns})")
    if parsed.host != name:
        problems.append(f"gang-sim binds {parsed.host!r}: other containers reach it as {name!r}")
    kubeconfig = parsed.kubeconfig_out
    volume = named_volume_of(service, kubeconfig)
    for airflow_name, airflow in airflow_services(document).items():
        connection = json.loads(airflow["environment"]["AIRFLOW_CONN_KUBERNETES_DEFAULT"])
        if connection["extra"]["kube_config_path"] != kubeconfig:
            problems.append(f"{airflow_name}: the connection reads {connection['extra']['kube_config_path']}")
        if volume is None or named_volume_of(airflow, kubeconfig) != volume:
            problems.append(f"{airflow_name}: {kubeconfig} is not on the volume gang-sim writes ({volume})")
    return problems


def trainer_image() -> str:
    """``TRAINER_IMAGE`` of the example DAG (read, not imported)."""
    tree = ast.parse((REPOSITORY / "dags" / "gang_nightly_training.py").read_text())
    (image,) = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(target, "id", None) for target in node.targets] == ["TRAINER_IMAGE"]
        and isinstance(node.value, ast.Constant)
    ]
    return str(image)


def path_problems(document: dict[str, Any]) -> list[str]:
    problems = []
    declared = set(document.get("volumes") or {})
    for name, service in document["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                if not (REPOSITORY / source).exists():
                    problems.append(f"{name}: host path {source} does not exist")
            elif source not in declared:
                problems.append(f"{name}: volume {source} is not declared")
        for dependency in service.get("depends_on") or {}:
            if dependency not in document["services"]:
                problems.append(f"{name}: depends on unknown service {dependency}")
    sim_service: dict[str, Any] = next(
        (
            service
            for name, service in document["services"].items()
            if any(words[0] == "gang-sim" for words in commands_of(service))
        ),
        {},
    )
    for name, service in airflow_services(document).items():
        dags = service["environment"]["AIRFLOW__CORE__DAGS_FOLDER"]
        host = container_to_host(service, dags)
        if host is None or not (host / "gang_nightly_training.py").is_file():
            problems.append(f"{name}: the DAGs folder {dags} does not hold the example DAG ({host})")
        # The example DAG runs its trainer by the path it is parsed from, in the gang-sim container.
        if container_to_host(sim_service, dags) != host:
            problems.append(f"gang-sim does not mount {name}'s DAGs folder at {dags}")
    return problems


def option_problems(document: dict[str, Any]) -> list[str]:
    from airflow.configuration import conf

    description = conf.configuration_description
    problems = []
    for name, service in document["services"].items():
        for variable in service.get("environment") or {}:
            match = re.fullmatch(r"AIRFLOW__([A-Z0-9_]+?)__([A-Z0-9_]+)", variable)
            if variable.startswith("AIRFLOW__") and match is None:
                problems.append(f"{name}: {variable} is not AIRFLOW__SECTION__KEY")
            elif match and match[2].lower() not in description.get(match[1].lower(), {}).get("options", {}):
                problems.append(f"{name}: {variable}: no option [{match[1].lower()}] {match[2].lower()}")
    return problems


def interpolation_problems(text: str) -> list[str]:
    """Every ``$...`` Compose would substitute (``$$`` is a literal ``$``) other than :data:`INTERPOLATED`."""
    found = re.finditer(r"\$(\{(\w+)(?::?[-?+][^}]*)?\}|\w+|.)", text.replace("$$", ""))
    return [match[0] for match in found if match[2] not in INTERPOLATED]
