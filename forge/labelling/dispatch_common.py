"""What the dispatchers (`forge.labelling.dispatch`, `dispatch_ray`, `dispatch_submitit`) share: the `workers`
check, and a lost worker's retry said in the log and counted in the store."""
from __future__ import annotations

import logging
from typing import Any

from forge.genomes.genome import Genome
from forge.labelling.base import DispatchError, _Base

log = logging.getLogger("forge.labelling.dispatch")


def check_workers(workers: Any, default: str) -> None:
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise DispatchError(f"dispatch.workers = {workers!r} is invalid; allowed: a positive int, or null for {default}")


def retried(trainer: _Base, g: Genome, why: str, attempt: int) -> None:
    """A lost worker or job tried again: said in the log, and counted in the store's `attempts`."""
    log.warning("%s: genome %s: %s; trying again (attempt %d of %d)", type(trainer).__name__, g.id,
                why.splitlines()[0][:300], attempt + 1, trainer.retries + 1)
    token = trainer._claims.get(g.id)
    if trainer.store is not None and token is not None:
        trainer.store.count_attempt(g.id, trainer._fp, token)
