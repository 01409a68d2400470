"""The Gang page names the cluster of every try once the tries ran on more than one."""

from __future__ import annotations

from airflow_provider_gang.plugin import gang_view
from airflow_provider_gang.reservation.records.tries import TryRecord


def _record(attempt: int, conn_id: str | None) -> TryRecord:
    return TryRecord(
        attempt=attempt,
        gang=f"g-t{attempt}",
        step="as configured" if attempt == 1 else "other cluster b",
        step_index=None if attempt == 1 else 0,
        mode="provisioning_request",
        size=2,
        outcome="capacity_not_found" if attempt == 1 else "all_succeeded",
        message="",
        retryable=attempt == 1,
        kubernetes_conn_id=conn_id,
    )


def test_tries_on_two_clusters_name_theirs_and_one_cluster_stays_quiet() -> None:
    both = [_record(1, "a"), _record(2, "b")]
    assert gang_view.several_clusters(both)
    assert [gang_view.try_row(item, name_cluster=True).cells[1] for item in both] == [
        "as configured (cluster a)",
        "other cluster b (cluster b)",
    ]
    one = [_record(1, "a"), _record(2, "a")]
    assert not gang_view.several_clusters(one)
    assert gang_view.try_row(one[0]).cells[1] == "as configured"
    summary = {"tries": [item.to_dict() for item in both]}
    assert [item.step for item in gang_view.summary_tries(summary)] == [
        "as configured (cluster a)",
        "other cluster b (cluster b)",
    ]
    assert [item.step for item in gang_view.summary_tries({"tries": [one[0].to_dict()]})] == ["as configured"]
