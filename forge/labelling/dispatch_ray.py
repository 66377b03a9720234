"""`dispatch=ray`: `ray.remote` tasks (optional extra `ray`), at most what the cluster fits at a time, each
claimed when it is sent; a lost worker or node is resubmitted here, logged and counted (`forge.labelling.dispatch`
for the failure policy all dispatchers share)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from forge.genomes.genome import Genome
from forge.genomes.labels import Label
from forge.labelling.base import DispatchError, _Base, _from_json, train_one
from forge.labelling.dispatch_common import check_workers as _check_workers, retried as _retried


@dataclass
class RayTrainer(_Base):
    """`ray.remote` tasks; `address="auto"` joins a cluster, null starts a local one.

    At most `workers` tasks at a time (null: as many as the cluster's CPUs/GPUs fit at `num_cpus`/`num_gpus`
    each), claimed as they are submitted, so a task starts when it is sent and its `timeout_s` counts from
    there; a genome not yet sent is not claimed, and another labeller on the store may take it. A lost
    worker or node is resubmitted here (not inside Ray), so each retry is logged and counted in `attempts`."""

    address: str | None = None
    num_gpus: float = 0.0
    num_cpus: float = 1.0
    workers: int | None = None
    init_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_workers(self.workers, "what the cluster fits")

    def _slots(self, ray) -> int:
        """Tasks the cluster runs at once: its CPUs (and GPUs) over what one task asks for."""
        total = ray.cluster_resources()
        fits = [int(total.get(k, 0) // n + 1e-9) for k, n in (("CPU", self.num_cpus), ("GPU", self.num_gpus)) if n > 0]
        return max(1, min(fits)) if fits else max(1, int(total.get("CPU", 1)))

    def _ray(self):
        try:
            import ray
        except ImportError:
            raise DispatchError("dispatch=ray needs the optional package ray: pip install -e '.[ray]' in the Forge "
                                "clone") from None
        if not ray.is_initialized():
            # null means a local instance of our own: Ray's own None would join any cluster another process
            # started on this machine (its /tmp/ray/ray_current_cluster), which is not the one asked for
            ray.init(address=self.address or "local", ignore_reinit_error=True, log_to_driver=False,
                     **dict(self.init_kwargs))
        return ray

    def slots(self) -> int:
        """W for an asynchronous co-evolution (search.coevolution_async): `workers`, or what the cluster fits."""
        return self.workers or self._slots(self._ray())

    def _run(self, todo: list[Genome], emit: Callable[[Label], None]) -> None:
        ray = self._ray()
        remote = ray.remote(num_gpus=self.num_gpus, num_cpus=self.num_cpus, max_retries=0)(train_one)
        cap = self.workers or self._slots(ray)
        queue, refs = [(g, 1) for g in todo], {}  # ref -> (genome, attempt, start)
        try:
            while queue or refs:
                while queue and len(refs) < cap:
                    g, attempt = queue.pop(0)
                    if attempt > 1 or self._take(g):
                        refs[remote.remote(g.to_dict(), self.spec)] = (g, attempt, time.monotonic())
                if not refs:
                    continue
                self._heartbeat()
                ready, _ = ray.wait(list(refs), num_returns=1, timeout=min(1.0, self.timeout_s))
                for ref in ready:
                    self._collect(ray, ref, refs.pop(ref), queue, emit)
                for ref, (g, _, t0) in list(refs.items()):
                    if time.monotonic() - t0 > self.timeout_s:
                        ray.cancel(ref, force=True)
                        del refs[ref]
                        emit(self._failed(g, f"timeout: no result after {self.timeout_s:g} s (cancelled)"))
        finally:
            for ref in refs:
                ray.cancel(ref, force=True)

    def _collect(self, ray, ref, entry: tuple, queue: list, emit: Callable[[Label], None]) -> None:
        from ray.exceptions import GetTimeoutError, RayError

        g, attempt, _ = entry
        try:
            emit(_from_json(ray.get(ref, timeout=60)))
        except (RayError, GetTimeoutError) as e:  # the worker or its node was lost
            why = f"ray task lost: {type(e).__name__}: {e}"[:2000]
            if attempt <= self.retries:
                _retried(self, g, why, attempt)
                queue.insert(0, (g, attempt + 1))
            else:
                emit(self._failed(g, f"{why} (on all {attempt} attempts)"))
