"""The seed cost replay (bench/seed_cost_model.py) on a stepped clock: bulk provisioning starts the
32-GPU job sooner and bills fewer GPU-hours than incremental scale-up, by the idle GPUs it avoids."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[3] / "bench" / "seed_cost_model.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("seed_cost_model", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["seed_cost_model"] = module
    spec.loader.exec_module(module)
    return module


def test_bulk_provisioning_saves_the_idle_ramp() -> None:
    bench = _bench()
    incremental = bench.replay("incremental", manual=True, time_scale=1.0, training_hours=0.5)
    bulk = bench.replay("bulk", manual=True, time_scale=1.0, training_hours=0.5)
    # 8 nodes at one per minute, each ready 60 s after its scale-up, vs all 8 requested at once.
    assert 7 * 60 <= incremental.all_running_after <= 10 * 60
    assert bulk.all_running_after <= 2 * 60
    assert bulk.idle_gpu_hours < incremental.idle_gpu_hours
    training = 32 * 0.5
    for result in (incremental, bulk):  # during training all 32 GPUs are billed, nothing else
        assert abs((result.gpu_hours - result.idle_gpu_hours) - training) < 1e-9
    assert bulk.gpu_hours < incremental.gpu_hours
