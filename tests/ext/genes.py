"""A per-layer gene declared outside Forge: importing this module registers it (`plugins.modules=[tests.ext.genes]`)."""
from __future__ import annotations

from forge.genes import Gene, register

GLU = register(Gene("glu", lo=0, default=0, doc="1: a gated (GLU) MLP on this layer, 0: a plain one"))
