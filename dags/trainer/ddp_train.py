"""A small data-parallel training job for the example gang: PyTorch DDP over gloo, on CPU.

Every member learns its place from the environment the operator gives it (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``; ``GANG_ORIGINAL_SIZE`` after a shrink), trains a linear model on its
shard of a synthetic regression problem, and rank 0 prints the result as one JSON line. After a
shrink it keeps the global batch by accumulating gradients over ``GANG_ORIGINAL_SIZE / WORLD_SIZE``
micro-batches per step, so the optimisation is the same whatever size the gang got.

In production this file lives in the trainer image; the example ships it next to the DAG so the
simulated cluster's local-process kubelet can run it.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist

STEPS = 30
MICRO_BATCH = 16
FEATURES = 8


def main() -> None:
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    original_size = int(os.environ.get("GANG_ORIGINAL_SIZE", world_size))
    accumulation = max(1, original_size // world_size)
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timedelta(seconds=120))

    torch.manual_seed(0)  # the same true weights and start on every rank
    true_weights = torch.randn(FEATURES, 1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(FEATURES, 1, bias=False))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own shard

    for _ in range(STEPS):
        optimiser.zero_grad()
        for _ in range(accumulation):
            inputs = torch.randn(MICRO_BATCH, FEATURES, generator=data)
            loss = torch.nn.functional.mse_loss(model(inputs), inputs @ true_weights) / accumulation
            loss.backward()
        optimiser.step()

    final = torch.tensor([loss.item() * accumulation])
    dist.all_reduce(final)  # mean loss over ranks, proving the ranks talk to each other
    if rank == 0:
        print(json.dumps({"world_size": world_size, "original_size": original_size, "steps": STEPS,
                          "mean_final_loss": round(final.item() / world_size, 6)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
