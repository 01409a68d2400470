"""A small multi-process JAX job for a gang: ``jax.distributed`` on CPU, one process per member.

Each member learns its place from the environment the operator gives it with ``distributed="jax"``:
``JAX_COORDINATOR_ADDRESS`` (rank 0's ``host:port``, behind the gang's headless Service),
``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``. ``jax.distributed.initialize()`` does not read these
variables by itself (it auto-detects only the clusters it knows: Slurm, Open MPI, TPU and GKE TPU
pods, Kubernetes JobSets), so they are passed explicitly. Every process then sums the squares of its
shard of ``0..N-1`` and two collectives combine the shards: ``process_allgather`` (every process
gets every process's id and partial sum) and a ``psum`` over the global device axis of a ``pmap``.
Rank 0 prints the result as one JSON line, with the closed form it must equal.

CPU collectives across processes use gloo (``jax_cpu_collectives_implementation``, the default of
recent jaxlib; set explicitly so an older default cannot silently run without cross-process
collectives). In production this file lives in the trainer image; the example ships it next to the
DAGs so the simulated cluster's local-process kubelet can run it (``tests/e2e/test_jax.py``).
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # read when jax is imported

import jax
import jax.numpy as jnp
from jax.experimental import multihost_utils

N = 1000
"""Sum of squares of 0..N-1 stays inside int32 (332,833,500)."""
INITIALIZATION_TIMEOUT_SECONDS = 120


def main() -> None:
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
        num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
        process_id=int(os.environ["JAX_PROCESS_ID"]),
        initialization_timeout=INITIALIZATION_TIMEOUT_SECONDS,
    )
    process, processes = jax.process_index(), jax.process_count()
    shard = jnp.arange(process, N, processes, dtype=jnp.int32)
    partial = jnp.sum(shard * shard)

    gathered = multihost_utils.process_allgather(jnp.array([process, partial], dtype=jnp.int32))
    local = jnp.zeros(jax.local_device_count(), dtype=jnp.int32).at[0].set(partial)  # once per process
    reduced = jax.pmap(lambda value: jax.lax.psum(value, "devices"), axis_name="devices")(local)
    if process == 0:
        print(
            json.dumps(
                {
                    "num_processes": processes,
                    "process_ids": [int(row[0]) for row in gathered.tolist()],
                    "sum_of_squares_allgather": sum(int(row[1]) for row in gathered.tolist()),
                    "sum_of_squares_psum": int(reduced[0]),
                    "expected": (N - 1) * N * (2 * N - 1) // 6,
                }
            ),
            flush=True,
        )
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
