"""``kube.shared_values.SharedValues``: equal parts of different objects become one instance, the
values stay equal, scalars of different types are not confused, skipped paths are not kept, and the
table stays within two generations."""

from __future__ import annotations

import copy
import json

from airflow_provider_gang.kube.shared_values import SharedValues

STATUS = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}


def pod(name: str, rank: int) -> dict:
    return json.loads(json.dumps({"metadata": {"name": name, "labels": {"rank": str(rank)}}, "status": STATUS}))


def test_equal_parts_of_separately_decoded_objects_are_one_instance_and_the_values_stay_equal():
    table = SharedValues(skip=frozenset(("metadata", "metadata.labels")))
    first, second = pod("a", 0), pod("b", 1)
    shared_first, shared_second = table.share(first), table.share(second)
    assert shared_first == first and shared_second == second
    assert shared_first["status"] is shared_second["status"]
    assert shared_first["status"]["conditions"][0]["reason"] is shared_second["status"]["conditions"][0]["reason"]
    assert shared_first is not first and shared_first is not table.share(copy.deepcopy(first))  # roots never kept
    assert shared_first["metadata"] is not table.share(pod("a", 0))["metadata"]  # skipped: unique per object


def test_scalars_of_different_types_and_different_values_are_not_shared():
    table = SharedValues()
    values = [table.share({"x": {"v": value}})["x"] for value in (1, 1.0, True, "1", None, 2)]
    assert [item["v"] for item in values] == [1, 1.0, True, "1", None, 2]
    assert [type(item["v"]) for item in values] == [int, float, bool, str, type(None), int]
    assert len({id(item) for item in values}) == len(values)
    assert table.share({"l": [1, 2]})["l"] is not table.share({"l": [2, 1]})["l"]


def test_the_table_keeps_at_most_two_generations_and_carries_what_is_still_seen():
    table = SharedValues(capacity=4)
    kept = table.share({"x": {"k": "common"}})["x"]
    for index in range(20):
        table.share({"x": {"k": index}})
        assert table.share({"x": {"k": "common"}})["x"] is kept  # seen again: carried into each generation
        assert len(table) <= 8
