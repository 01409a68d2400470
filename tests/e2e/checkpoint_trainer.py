"""A stdlib trainer that checkpoints as the README's "Spot with checkpoint and resume" asks, for the
end-to-end tests of a drained gang (no torch: each rank is a loop of timed steps).

- Rank 0 saves ``{"step": N}`` to ``$GANG_CHECKPOINT_DIR/checkpoint.json`` every ``--every`` steps.
- After every step, and on SIGTERM, rank 0 writes ``{"checkpoint_step": <saved>, "step": <done>}`` to
  ``$GANG_TERMINATION_MESSAGE_PATH`` (``--save-on-sigterm``: it saves first, taking
  ``--save-seconds``, so the report is the step it stopped at); then it exits 143.
- ``--ignore-sigterm``: every rank keeps training through SIGTERM (the kubelet kills it when its
  grace period ends); rank 0's report is the one it wrote after its last step.
- With ``GANG_RESUME=1`` rank 0 loads the checkpoint and prints ``rank 0: loaded checkpoint at step N``;
  every rank then continues at step ``N + 1`` (``GANG_RESUME_STEP``).

Every rank prints ``rank R: step N`` after each step.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

REPORT_WIDTH = 64
"""Bytes of every report (JSON padded with spaces, which a JSON reader skips)."""


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--every", type=int, default=5, help="steps between checkpoints")
    parser.add_argument("--step-seconds", type=float, default=0.1)
    parser.add_argument("--save-on-sigterm", action="store_true")
    parser.add_argument("--save-seconds", type=float, default=0.0, help="how long a save on SIGTERM takes")
    parser.add_argument("--ignore-sigterm", action="store_true")
    return parser.parse_args()


class Trainer:
    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.rank = int(os.environ["GANG_RANK"])
        self.checkpoint = Path(os.environ["GANG_CHECKPOINT_DIR"]) / "checkpoint.json"
        self.message_path = os.environ["GANG_TERMINATION_MESSAGE_PATH"]
        self.saved = self.done = 0

    def resume(self) -> None:
        if os.environ.get("GANG_RESUME") != "1":
            print(f"rank {self.rank}: starting afresh", flush=True)
            return
        self.saved = self.done = int(os.environ["GANG_RESUME_STEP"])
        if self.rank == 0:
            loaded = json.loads(self.checkpoint.read_text())["step"]
            print(f"rank 0: loaded checkpoint at step {loaded}", flush=True)
            assert loaded == self.saved, (loaded, self.saved)

    def save(self) -> None:
        self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        partial = self.checkpoint.with_suffix(".partial")
        partial.write_text(json.dumps({"step": self.done}))
        partial.replace(self.checkpoint)
        self.saved = self.done

    def report(self) -> None:
        """One write of a fixed width over the last report, never a truncation: a SIGKILL (the end of
        the grace period) leaves the old report or the new one, not an empty file. (Renaming a file
        over the path would not do: a container's termination-message file is a bind mount.)"""
        if self.rank == 0:
            message = json.dumps({"checkpoint_step": self.saved, "step": self.done}).ljust(REPORT_WIDTH)
            descriptor = os.open(self.message_path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(descriptor, message.encode(), 0)
            finally:
                os.close(descriptor)

    def on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        print(f"rank {self.rank}: SIGTERM at step {self.done}", flush=True)
        if self.rank == 0 and self.options.save_on_sigterm:
            time.sleep(self.options.save_seconds)
            self.save()
        self.report()
        sys.exit(143)

    def train(self) -> None:
        while self.done < self.options.steps:
            time.sleep(self.options.step_seconds)
            self.done += 1
            if self.rank == 0 and self.done % self.options.every == 0:
                self.save()
            print(f"rank {self.rank}: step {self.done}", flush=True)
            self.report()
        print(f"rank {self.rank}: done", flush=True)


def main() -> None:
    options = arguments()
    trainer = Trainer(options)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if options.ignore_sigterm else trainer.on_sigterm)
    trainer.resume()
    trainer.train()


if __name__ == "__main__":
    main()
