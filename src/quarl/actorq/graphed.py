"""A learner's update captured as one CUDA graph (`actorq.cuda_graph=true`, DQN on a CUDA learner).

A 3x2048 DQN update is a few hundred small kernels; launched one by one from Python it costs the
host 2.5-3 ms, so the GPU waits on the host. Captured once, each later update is one graph launch.

`GraphedStep` wraps `step(inputs) -> loss`, a function of device tensors that does its whole update
(forward, backward, clipping, optimiser step) in place. Its first `WARMUP` calls run eagerly on a
side stream (real updates: CUDA graphs need the optimiser's state and the allocator warmed up), the
next one captures the graph and every call after replays it. Batches reach the graph's fixed input
tensors through a ring of pinned host buffers, each copied without waiting: a batch's copy to the
device overlaps the previous update, and a buffer is written again only once its last copy is done.
The optimiser must keep its step count on the device (`networks.adam`: fused on a GPU).
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch

WARMUP = 3  # eager updates on a side stream before the capture
RING = 4  # pinned host buffers a batch can be staged in while earlier copies are in flight

Step = Callable[[dict[str, torch.Tensor]], torch.Tensor]


class GraphedStep:
    """`step` on fixed device inputs, replayed as one CUDA graph after WARMUP eager calls."""

    def __init__(self, step: Step, device: torch.device) -> None:
        self.step, self.device = step, device
        self.calls = 0
        self.graph: Optional[torch.cuda.CUDAGraph] = None
        self.side = torch.cuda.Stream(device)
        self.staging: list[dict[str, torch.Tensor]] = []
        self.copied: list[Optional[torch.cuda.Event]] = [None] * RING
        self.inputs: dict[str, torch.Tensor] = {}
        self.loss: Optional[torch.Tensor] = None

    def __call__(self, batch: dict[str, np.ndarray]) -> torch.Tensor:
        """One update on `batch` (same shapes and dtypes every call); its loss, a fresh device tensor."""
        self._load(batch)
        if self.calls < WARMUP:
            loss = self._eager()
        elif self.graph is None:
            loss = self._capture()
        else:
            self.graph.replay()
            assert self.loss is not None
            loss = self.loss
        self.calls += 1
        return loss.clone()  # the graph's own loss tensor is overwritten by the next replay

    def _load(self, batch: dict[str, np.ndarray]) -> None:
        """Copy `batch` into the graph's inputs through the next pinned buffer, without waiting."""
        if not self.staging:
            self.staging = [
                {k: torch.empty(v.shape, dtype=torch.from_numpy(v).dtype).pin_memory() for k, v in batch.items()}
                for _ in range(RING)
            ]
            self.inputs = {k: torch.empty_like(v, device=self.device) for k, v in self.staging[0].items()}
        slot = self.calls % RING
        previous = self.copied[slot]
        if previous is not None:
            previous.synchronize()  # this buffer's previous batch has left for the device
        for k, v in batch.items():
            self.staging[slot][k].numpy()[...] = v
            self.inputs[k].copy_(self.staging[slot][k], non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self.copied[slot] = event

    def _eager(self) -> torch.Tensor:
        self.side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.side):
            loss = self.step(self.inputs)
        torch.cuda.current_stream(self.device).wait_stream(self.side)
        return loss

    def _capture(self) -> torch.Tensor:
        """Record `step` on the current inputs as the graph, then run it once (this call's update)."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.loss = self.step(self.inputs)
        self.graph = graph
        graph.replay()
        return self.loss
