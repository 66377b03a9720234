"""Deprecated (issue 51): tiers of overlapping intervals said "cannot tell apart" where the calibrated odds said
otherwise. Their replacement is `search.odds` (p_best, loss_groups, decide_lines); this alias keeps the old
import path for one release and warns."""
from __future__ import annotations

import warnings

from search.odds import CPU_RATE, GPU_RATE, VERIFY_K, training_time  # noqa: F401 (the old names)

warnings.warn("search.tiers is deprecated: use search.odds (tiers of overlapping intervals are gone, see "
              "CHANGELOG issue 51)", DeprecationWarning, stacklevel=2)
