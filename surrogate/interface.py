"""The predictor interface the search consumes: validation loss with an uncertainty."""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from forge.genome import Genome


class Predictor(Protocol):
    def predict(self, genomes: Sequence[Genome], n_mc: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(mu, sigma) per genome; n_mc = 0 is the deterministic pass with sigma = 0."""
        ...
