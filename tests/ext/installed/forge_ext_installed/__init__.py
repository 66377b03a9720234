"""A plug-in package as `pip install` leaves it (this folder is a site folder: the package beside its dist-info,
whose entry_points.txt declares it in the `forge.plugins` group): every command imports it, and a run records it
only when it uses its gene or its objective. Tests copy the folder and put the copy on sys.path ("installed"),
then take it away ("pip uninstall")."""
from __future__ import annotations

from forge.genomes.genes import Gene, register

LOWRANK = register(Gene("lowrank", lo=0, default=0, doc="1: a low-rank MLP on this layer (a test gene: no cost)"))


def active_layers(genomes):
    """An objective: the number of active layers of each genome."""
    return [float(g.n_active) for g in genomes]
