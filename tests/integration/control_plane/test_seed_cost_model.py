"""The seed cost replay (bench/seed_cost_model.py) in its small version: without a reservation the
members that started wait at the rendezvous until it times out and the job is retried, while the
gang path bills nothing until the whole capacity is provisioned; a spot preemption costs less when
the retry resumes from the checkpoint the provider hands it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("seed_cost_model", BENCH / "seed_cost_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["seed_cost_model"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _bench()


def test_without_gang_the_started_members_time_out_and_the_job_is_retried(bench: ModuleType) -> None:
    story = bench.SMOKE
    plain, gang = bench.no_gang_story(story, 8, stockout=True)
    outcomes = [record.outcome for record in plain.tries]
    assert outcomes[0] == "rendezvous timeout" and outcomes[-1] == "succeeded", outcomes
    # the first try timed out on the nodes it got: its members started before the restock
    assert plain.tries[0].ended_at < story.restock_at
    assert [record.outcome for record in gang.tries] == ["succeeded"]
    # the atomic scale-up created no node before the stock was back, and all of them at once
    assert all(bill.created_at >= story.restock_at for bill in gang.bills)
    assert len({bill.created_at for bill in gang.bills}) == 1
    training = 8 * story.training_seconds / 3600  # 2 nodes x 4 GPUs, all busy while the job trains
    for result in (plain, gang):
        _before, during, _after = result.split()
        assert during == pytest.approx(training)
        assert result.gpu_hours == pytest.approx(sum(result.split()))
    assert gang.split()[0] < plain.split()[0]
    assert gang.gpu_hours < plain.gpu_hours


def test_spot_resume_redoes_only_the_steps_after_the_checkpoint(bench: ModuleType) -> None:
    story = bench.SMOKE
    fraction, (anchor, resumed, restarted) = bench.spot_story(story, seed=0)
    assert [record.outcome for record in anchor.tries] == ["succeeded"]
    for result in (resumed, restarted):
        assert [record.outcome for record in result.tries] == ["spot preempted", "succeeded"]
        assert result.tries[0].trained_seconds == pytest.approx(fraction * story.training_seconds)
    first, second = resumed.tries
    every = story.checkpoint_every
    assert first.checkpoint_step == int(first.trained_seconds // every) * every > 0
    assert second.resumed_from == first.checkpoint_step  # GANG_RESUME_STEP of the retry's members
    assert second.trained_seconds == story.training_seconds - first.checkpoint_step
    assert restarted.tries[1].resumed_from == 0 and restarted.tries[0].checkpoint_step is None
    assert anchor.gpu_hours < resumed.gpu_hours < restarted.gpu_hours
