"""A small data-parallel training job for the example gang: PyTorch DDP over gloo, on CPU.

Every member learns its place from the environment the operator gives it (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``; ``GANG_ORIGINAL_SIZE`` after a shrink), trains a linear model on its
shard of a synthetic regression problem, and rank 0 prints the result as one JSON line. After a
shrink it keeps the global batch by accumulating gradients over ``GANG_ORIGINAL_SIZE / WORLD_SIZE``
micro-batches per step, so the optimisation is the same whatever size the gang got.

Checkpoint and resume (when the operator has a ``checkpoint``, so ``GANG_CHECKPOINT_DIR`` is set; a
local or mounted path here - a ``gs://`` location needs a storage client this example does not use):

- rank 0 saves the model every ``--checkpoint-every`` steps and when it gets SIGTERM (a spot node's
  shutdown notice, or the gang being deleted), within the grace period, then exits with 143;
- after every step rank 0 writes ``{"checkpoint_step": N, "step": M}`` to
  ``GANG_TERMINATION_MESSAGE_PATH``; the kubelet hands the file's last content to the provider as
  the pod's termination message, which is how the next try learns the checkpoint;
- with ``GANG_RESUME=1`` rank 0 loads the checkpoint before DDP broadcasts its weights to every rank,
  and training continues at the step after it. The batches of step ``s`` on rank ``r`` are drawn from
  a generator seeded by ``(r, s)``, so a resumed run sees the batches an uninterrupted one would.

Rank 0 prints ``step <s> loss <value>`` after every step when checkpointing, so the log shows where a
try started and that the loss carried on.

In production this file lives in the trainer image; the example ships it next to the DAG so the
simulated cluster's local-process kubelet can run it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from types import FrameType

import torch
import torch.distributed as dist

STEPS = 30
MICRO_BATCH = 16
FEATURES = 8
CHECKPOINT_FILE = "model.pt"
TERMINATED_EXIT_CODE = 143  # 128 + SIGTERM, what a container killed by SIGTERM reports
REPORT_WIDTH = 64  # bytes of every termination message: JSON padded with spaces, which JSON readers skip


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--checkpoint-every", type=int, default=5, help="steps between checkpoints")
    parser.add_argument(
        "--step-seconds",
        type=float,
        default=0.0,
        help="extra time per step, standing in for real work (so a run can be interrupted)",
    )
    return parser.parse_args()


class Checkpointing:
    """Where rank 0 saves, what it last saved, and the termination message that says so."""

    def __init__(self, rank: int) -> None:
        location = os.environ.get("GANG_CHECKPOINT_DIR")
        if location and "://" in location:
            raise SystemExit(
                f"GANG_CHECKPOINT_DIR={location}: this example saves to a local or mounted path; "
                "a URI needs a storage client (e.g. fsspec) in the trainer"
            )
        self.directory = Path(location) if location else None
        self.message_path = os.environ.get("GANG_TERMINATION_MESSAGE_PATH")
        self.writes = rank == 0 and self.directory is not None
        self.saved_step = int(os.environ.get("GANG_RESUME_STEP", "0")) if os.environ.get("GANG_RESUME") == "1" else 0

    def resume(self, model: torch.nn.Module) -> int:
        """Load the checkpoint when resuming; the last step it holds (0: start afresh)."""
        if self.directory is None or os.environ.get("GANG_RESUME") != "1":
            return 0
        state = torch.load(self.directory / CHECKPOINT_FILE, weights_only=True)
        model.load_state_dict(state["model"])
        self.saved_step = int(state["step"])
        return self.saved_step

    def save(self, model: torch.nn.Module, step: int) -> None:
        if not self.writes or self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = self.directory / f".{CHECKPOINT_FILE}.partial"
        torch.save({"model": model.state_dict(), "step": step}, partial)
        partial.replace(self.directory / CHECKPOINT_FILE)  # never a half-written checkpoint
        self.saved_step = step

    def report(self, step: int) -> None:
        """Write the termination message: the last checkpoint and the last step completed. One write
        of a fixed width over the last message, never a truncation first: a SIGKILL at the end of the
        grace period leaves the old message or the new one, not an empty file (the file is a bind
        mount in a container, so a rename over it would fail)."""
        if self.writes and self.message_path and self.saved_step:
            message = json.dumps({"checkpoint_step": self.saved_step, "step": step}).ljust(REPORT_WIDTH)
            descriptor = os.open(self.message_path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(descriptor, message.encode(), 0)
            finally:
                os.close(descriptor)


def batches(rank: int, step: int) -> torch.Generator:
    """The generator of rank ``rank``'s batches at ``step``: each rank its own shard, each step its
    own draw, the same whether or not the run was interrupted."""
    return torch.Generator().manual_seed(1000 + 100_003 * rank + step)


def main() -> None:
    options = arguments()
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    original_size = int(os.environ.get("GANG_ORIGINAL_SIZE", world_size))
    accumulation = max(1, original_size // world_size)
    stopping: list[int] = []

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    checkpoints = Checkpointing(rank)  # a location it cannot use stops every rank before the rendezvous
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timedelta(seconds=120))

    torch.manual_seed(0)  # the same true weights and start on every rank
    true_weights = torch.randn(FEATURES, 1)
    linear = torch.nn.Linear(FEATURES, 1, bias=False)
    first = checkpoints.resume(linear) + 1 if rank == 0 else 0
    model = torch.nn.parallel.DistributedDataParallel(linear)  # broadcasts rank 0's (resumed) weights
    start = torch.tensor([first])
    dist.broadcast(start, src=0)
    first = int(start.item()) or 1
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)  # no state: nothing else to restore
    if rank == 0 and checkpoints.directory is not None:
        print(f"try {os.environ.get('GANG_TRY_NUMBER', '?')} starts at step {first}", flush=True)

    for step in range(first, options.steps + 1):
        data = batches(rank, step)
        optimiser.zero_grad()
        for _ in range(accumulation):
            inputs = torch.randn(MICRO_BATCH, FEATURES, generator=data)
            loss = torch.nn.functional.mse_loss(model(inputs), inputs @ true_weights) / accumulation
            loss.backward()
        optimiser.step()
        time.sleep(options.step_seconds)
        if checkpoints.directory is not None and rank == 0:
            print(f"step {step} loss {loss.item() * accumulation:.6f}", flush=True)
        if stopping or step % options.checkpoint_every == 0:
            checkpoints.save(linear, step)
        checkpoints.report(step)
        if stopping:
            saved = f", checkpoint at step {checkpoints.saved_step}" if checkpoints.writes else ""
            print(f"rank {rank}: SIGTERM after step {step}{saved}; exiting", flush=True)
            sys.exit(TERMINATED_EXIT_CODE)

    with torch.no_grad():  # the trained model on a batch of its own (also when resumed past the end)
        inputs = torch.randn(MICRO_BATCH, FEATURES, generator=batches(rank, 0))
        final = torch.nn.functional.mse_loss(model(inputs), inputs @ true_weights).reshape(1)
    dist.all_reduce(final)  # mean loss over ranks, proving the ranks talk to each other
    if rank == 0:
        print(
            json.dumps(
                {
                    "world_size": world_size,
                    "original_size": original_size,
                    "steps": options.steps,
                    "first_step": first,
                    "mean_final_loss": round(final.item() / world_size, 6),
                }
            ),
            flush=True,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
