"""Search spaces: the grids a genome is drawn from and the integer codec the optimizer works on.

space (the class a space yaml's `_target_` names: grids, sampling, repair) · codec (rows of grid indices ↔
values, arrays, genomes) · grids (parsing a space yaml's grids) · links (a space yaml's ratio and tied genes) ·
arrays (struct-of-arrays populations, the input of every vectorized cost model, and `GenomeBatch`).

May import forge.genomes, forge.errors, forge.disk, forge.plugins (a space plug-in is resolved there) and
forge.runtime.config (the shipped space group); never the model, which is built on the arrays here.
"""
