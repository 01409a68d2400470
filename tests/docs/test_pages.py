"""The pages say what the code does: tables against the code, examples against the files tests run.

- the fallback ladder's tables (docs/fallbacks.md) are the code's step defaults and transient reasons;
- the quick start shows what ``make demo`` prints (the labels of ``demo.report``);
- every ``literalinclude`` names a file a test runs (the example DAGs, ``docs/examples/``);
- the README's DAG is ``docs/examples/first_gang_taskflow.py``, and the README stays a front door
  (at most 300 lines);
- every ``python`` block of every page runs: it builds its operators inside a DAG (the operator checks
  its arguments then), or defines what it shows;
- the tables of the operator's and the decorator's arguments and of the ``[gang]`` options are
  generated from their records (``generated-table``), and no page holds a hand-written copy.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.reservation import ladder_format, phases
from airflow_provider_gang.reservation.phases import Reason
from tests.docs.pages import DOCS, README, REPOSITORY, blocks, name_of, sources

FALLBACKS = DOCS / "fallbacks.md"
QUICKSTART = DOCS / "quickstart.md"
README_LINES = 300
RUN_BY_TESTS = ("dags/", "docs/examples/")
"""Where a ``literalinclude`` may point: files that tests run (``tests/e2e/test_example_dags.py`` runs
every DAG of ``dags/``, ``tests/e2e/test_first_dag.py`` and ``tests/release`` those of ``docs/examples/``)."""


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (a ``## `` line) up to the next heading of that level."""
    text = path.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 5)
    return text[start : end if end > 0 else None]


def table_rows() -> dict[str, set[str]]:
    rows: dict[str, set[str]] = {}
    for line in section(FALLBACKS, "Which step answers which failure").splitlines():
        match = re.match(r"\| `(\w+)\(.*?\)` \| (.+) \|$", line)
        if match:
            rows[match.group(1)] = set(re.findall(r"`(\w+)`", match.group(2)))
    return rows


def test_the_fallbacks_page_says_which_step_answers_which_failure() -> None:
    rows = table_rows()
    assert set(rows) == set(ladder_format.STEP_TYPES)
    retryable = {reason.value for reason in Reason if phases.is_retryable(reason)}
    for name, kind in ladder_format.STEP_TYPES.items():
        documented = retryable if rows[name] == set() else rows[name]
        assert documented == {reason.value for reason in kind.default_reasons}, name


def test_the_fallbacks_page_lists_every_step_of_the_code() -> None:
    listed = re.findall(r"^\| `(\w+)\(", FALLBACKS.read_text().split("\n## ", 1)[0], flags=re.M)
    assert listed == list(ladder_format.STEP_TYPES)


def test_the_fallbacks_page_lists_the_transient_reasons_of_the_code() -> None:
    from airflow_provider_gang.reservation.ladder_choice import TRANSIENT_REASONS

    row = next(line for line in FALLBACKS.read_text().splitlines() if line.startswith("| transient |"))
    assert set(re.findall(r"`(\w+)`", row.split("|")[2])) == {reason.value for reason in TRANSIENT_REASONS}


def test_the_quick_start_shows_what_make_demo_prints() -> None:
    from demo.report import report

    (shown_block,) = blocks(QUICKSTART, "text")
    shown = shown_block.text.splitlines()
    tries = [line for line in shown if line.startswith("  ") and not line.strip().startswith("try |")]
    summary = {
        "tries": [
            {
                "attempt": index + 1,
                "step": "s",
                "mode": "m",
                "size": 8,
                "outcome": "o",
                "message": "",
                "gpu_hours_reserved": 0.0,
                "gpu_hours_used": 0.0,
                "gpu_hours_idle": 0.0,
            }
            for index in range(len(tries))
        ],
        "size_run": 8,
        "size_requested": 8,
        "zone": "z",
        "provisioning_class": "c",
        "fallback_step": "f",
        "exit_codes": {},
        "rank_logs": {"0": '{"mean_final_loss": 0.5}'},
        "all_tries": {"gpu_hours_reserved": 0.0, "gpu_hours_used": 0.0, "gpu_hours_idle": 0.0},
    }
    printed = report("success", summary, 1.0)

    def labels(lines: list[str]) -> list[str]:
        return [line.split(":")[0].split(" (")[0] for line in lines if not line.startswith("  ")]

    assert labels(printed) == labels(shown)[: len(labels(printed))]
    assert labels(shown)[len(labels(printed)) :] == ["Pods left in the cluster"]  # printed by main()
    assert [cell.strip() for cell in printed[1].split("|")] == [cell.strip() for cell in shown[1].split("|")]


def included_files() -> list[tuple[str, Path]]:
    """(page, file) of every ``literalinclude`` of the doc set."""
    found = []
    for path in sources():
        for match in re.finditer(r"^ *```\{literalinclude\} (\S+)", path.read_text(), flags=re.M):
            found.append((name_of(path), (path.parent / match.group(1)).resolve()))
    return found


def test_every_included_file_exists_and_is_run_by_a_test() -> None:
    included = included_files()
    assert len(included) >= 10
    for page, file in included:
        assert file.is_file(), f"{page}: {file} does not exist"
        assert file.relative_to(REPOSITORY).as_posix().startswith(RUN_BY_TESTS), f"{page}: {file}"


def test_every_example_dag_is_on_a_page() -> None:
    included = {file for _, file in included_files()}
    dags = {path.resolve() for path in (REPOSITORY / "dags").glob("*.py")}
    examples = {path.resolve() for path in (DOCS / "examples").glob("*.py")}
    assert dags | examples <= included, sorted(map(str, (dags | examples) - included))


GENERATED_TABLES = {
    "docs/operators/index.md": "airflow_provider_gang.reservation.tries.argument_table:markdown_argument_tables",
    "docs/decorator.md": "airflow_provider_gang.decorators.gang:markdown_argument_tables",
    "docs/installation.md": "airflow_provider_gang.reservation.tries.argument_table:markdown_configuration_table",
}


def test_the_argument_and_option_tables_are_generated_from_their_records() -> None:
    for page, path in GENERATED_TABLES.items():
        assert f"```{{generated-table}} {path}\n```" in (REPOSITORY / page).read_text(), page
    header = re.compile(r"^\| (Argument|Option) \|", flags=re.M)
    assert [name_of(path) for path in sources() if header.search(path.read_text())] == []


def test_the_readme_dag_is_the_example_the_tests_run() -> None:
    example = (DOCS / "examples" / "first_gang_taskflow.py").read_text()
    shown = example[example.index("from datetime import datetime") :]
    (block,) = blocks(README, "python")
    assert block.text == shown


def test_the_readme_is_a_front_door() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines; move the detail into docs/"


def python_blocks() -> list[Any]:
    """The pages' python blocks; the README's is the decorator DAG, checked against its example above."""
    return [block for path in sources() if path != README for block in blocks(path, "python")]


@pytest.mark.parametrize("block", python_blocks(), ids=lambda block: f"{block.page}:{block.line}")
def test_every_python_block_runs(block: Any) -> None:
    import pendulum
    from airflow.sdk import DAG

    from airflow_provider_gang.operators import GangTrainingOperator
    from airflow_provider_gang.reservation import fallback

    namespace: dict[str, Any] = {
        "GangTrainingOperator": GangTrainingOperator,
        **{name: getattr(fallback, name) for name in ladder_format.STEP_TYPES},
    }
    dag_id = re.sub(r"\W", "_", f"docs_{block.page}_{block.line}")
    with DAG(dag_id=dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        exec(compile(block.text, f"{block.page} python block at line {block.line}", "exec"), namespace)
    for task in dag.tasks:
        assert isinstance(task, GangTrainingOperator)
        assert task.argument_warnings() == [], f"{block.page}:{block.line}: {task.argument_warnings()}"


def test_the_spot_example_builds_a_checkpointed_gang() -> None:
    import pendulum
    from airflow.sdk import DAG

    from airflow_provider_gang.operators import GangTrainingOperator
    from airflow_provider_gang.reservation.fallback import OnDemand, RetryAsIs

    (block,) = blocks(DOCS / "operators" / "spot.md", "python")
    with DAG(dag_id="docs_spot", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        operator = eval(
            block.text, {"GangTrainingOperator": GangTrainingOperator, "RetryAsIs": RetryAsIs, "OnDemand": OnDemand}
        )
    assert operator.argument_warnings() == []  # retries cover RetryAsIs(times=3) and OnDemand()
    assert operator.build_spec("docs-spot-t1-abc", stand_ins=True).checkpoint is not None
