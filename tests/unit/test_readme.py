"""The README's table of fallback defaults is the code's."""

from __future__ import annotations

import re
from pathlib import Path

from airflow_provider_gang.reservation import ladder_format, phases
from airflow_provider_gang.reservation.phases import Reason

README = Path(__file__).resolve().parents[2] / "README.md"


def table_rows() -> dict[str, set[str]]:
    text = README.read_text()
    section = text[text.index("### Which step answers which failure") :]
    section = section[: section.index("\n### ", 5)]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        match = re.match(r"\| `(\w+)\(.*?\)` \| (.+) \|$", line)
        if match:
            rows[match.group(1)] = set(re.findall(r"`(\w+)`", match.group(2)))
    return rows


def test_the_readme_says_which_step_answers_which_failure() -> None:
    rows = table_rows()
    assert set(rows) == set(ladder_format.STEP_TYPES)
    retryable = {reason.value for reason in Reason if phases.is_retryable(reason)}
    for name, kind in ladder_format.STEP_TYPES.items():
        documented = retryable if rows[name] == set() else rows[name]
        assert documented == {reason.value for reason in kind.default_reasons}, name


def test_the_readme_shows_what_make_demo_prints() -> None:
    from demo.report import report

    text = README.read_text()
    shown = text.split("make demo\n```", 1)[1].split("```text\n", 1)[1].split("```", 1)[0].splitlines()
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


def test_the_readme_first_dag_is_the_one_the_e2e_test_runs() -> None:
    from tests.e2e.test_first_dag import DAG_FILE

    assert f"```python\n{DAG_FILE.strip(chr(10))}\n```" in README.read_text()


def test_the_readme_spot_example_builds_and_uses_its_whole_ladder() -> None:
    import pendulum
    from airflow.sdk import DAG

    from airflow_provider_gang.operators import GangTrainingOperator
    from airflow_provider_gang.reservation.fallback import OnDemand, RetryAsIs

    text = README.read_text()
    section = text[text.index("### Spot with checkpoint and resume") :]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    with DAG(dag_id="readme_spot", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        operator = eval(
            block, {"GangTrainingOperator": GangTrainingOperator, "RetryAsIs": RetryAsIs, "OnDemand": OnDemand}
        )
    assert operator.argument_warnings() == []  # retries cover RetryAsIs(times=3) and OnDemand()
    assert operator.build_spec("readme-spot-t1-abc", stand_ins=True).checkpoint is not None


def test_the_readme_lists_the_transient_reasons_of_the_code() -> None:
    from airflow_provider_gang.reservation.ladder_choice import TRANSIENT_REASONS

    text = README.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| transient |"))
    assert set(re.findall(r"`(\w+)`", row.split("|")[2])) == {reason.value for reason in TRANSIENT_REASONS}
