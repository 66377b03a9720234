"""A plug-in package written before issue 46 regrouped forge/ (its imports are the old flat paths), as `pip install`
leaves it (this folder is a site folder: the package beside its dist-info, whose entry_points.txt declares it in the
`forge.plugins` group). Every command still imports it, with one warning per old path naming the new one."""
from __future__ import annotations

from forge.genes import Gene, register  # forge.genomes.genes since issue 46
from forge.genome import Genome  # forge.genomes.genome since issue 46

WIDE = register(Gene("wide_old", lo=0, default=0, doc="1: a wider layer (a test gene written against old paths)"))


def n_layers(genomes: list[Genome]) -> list[float]:
    """An objective: the number of active layers of each genome."""
    return [float(g.n_active) for g in genomes]
