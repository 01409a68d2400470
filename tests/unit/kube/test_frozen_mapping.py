"""``kube.frozen_mapping``: a frozen mapping reads, compares and copies as the dict it stands for, cannot
be changed, shares its key layout with every mapping of the same keys, and is what the watch cache
holds for the metadata and labels of each object, which the shape check still reads as objects."""

from __future__ import annotations

import copy
import pickle
import sys

import pytest

from airflow_provider_gang.kube.frozen_mapping import FrozenMapping, Layouts
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.reservation import shape
from airflow_provider_gang.triggers.observation import trimmer

LABELS = {"airflow-gang.io/gang": "g", "airflow-gang.io/role": "member", "airflow-gang.io/rank": "3"}


def test_a_frozen_mapping_reads_and_compares_as_its_dict():
    frozen = Layouts().frozen(LABELS)
    assert frozen == LABELS and LABELS.__eq__(frozen) is NotImplemented and frozen != {**LABELS, "x": "y"}
    assert dict(LABELS) == frozen  # the dict on the left: dict.__eq__ defers to the Mapping
    assert list(frozen) == list(LABELS) and list(frozen.items()) == list(LABELS.items()) and len(frozen) == 3
    assert frozen["airflow-gang.io/rank"] == "3" and frozen.get("airflow-gang.io/rank") == "3"
    assert frozen.get("missing") is None and frozen.get("missing", "d") == "d" and "missing" not in frozen
    with pytest.raises(KeyError):
        frozen["missing"]
    assert repr(frozen) == repr(LABELS)


def test_a_frozen_mapping_cannot_be_changed_and_its_copies_are_plain_dicts():
    frozen = Layouts().frozen(LABELS)
    with pytest.raises(TypeError):
        frozen["airflow-gang.io/rank"] = "4"  # type: ignore[index]
    with pytest.raises(AttributeError):
        frozen.extra = 1  # type: ignore[attr-defined]
    for duplicate in (copy.deepcopy(frozen), copy.copy(frozen), pickle.loads(pickle.dumps(frozen))):
        assert type(duplicate) is dict and duplicate == LABELS


def test_mappings_of_the_same_keys_share_one_layout_and_cost_less_than_dicts():
    layouts = Layouts()
    first, second = layouts.frozen(LABELS), layouts.frozen({**LABELS, "airflow-gang.io/rank": "4"})
    reordered = layouts.frozen(dict(reversed(list(LABELS.items()))))
    assert first._layout is second._layout and reordered._layout is not first._layout and len(layouts) == 2
    assert sys.getsizeof(first) + sys.getsizeof(first._values) < sys.getsizeof(dict(LABELS))
    with pytest.raises(ValueError):
        FrozenMapping({"a": 0}, ())


def test_past_its_capacity_the_layout_table_starts_again_and_every_mapping_keeps_reading():
    layouts = Layouts(capacity=2)
    kept = [layouts.frozen({f"k{index}": index}) for index in range(5)]
    assert len(layouts) <= 2
    assert [dict(mapping) for mapping in kept] == [{f"k{index}": index} for index in range(5)]


def test_the_watch_cache_holds_metadata_and_labels_frozen_and_the_shape_check_reads_them_as_objects():
    pod = {
        "metadata": {"name": "g-3", "namespace": "ml", "labels": dict(LABELS), "annotations": {"a": "b"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "worker"}]},
        "status": {"phase": "Running"},
    }
    cached = trimmer(PODS.key)(copy.deepcopy(pod))
    assert cached == pod
    assert isinstance(cached["metadata"], FrozenMapping) and isinstance(cached["metadata"]["labels"], FrozenMapping)
    assert type(cached["metadata"]["annotations"]) is dict  # shared between members, not frozen
    assert shape.malformed("Pod", cached) is None
    broken = trimmer(PODS.key)({**copy.deepcopy(pod), "metadata": {**pod["metadata"], "labels": ["not", "an object"]}})
    assert shape.malformed("Pod", broken) == "Pod ml/g-3: metadata.labels is a list, not an object"
