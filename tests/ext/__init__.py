"""A researcher's extension of Forge, written outside the package: it reaches every command only through
`plugins.modules=[tests.ext.genes]` (or an installed `forge.plugins` entry point), never by editing Forge."""
from __future__ import annotations

import sys

GENES = ("glu", "mlp_off")


def forget() -> None:
    """Undo the extension in this process (a test's teardown): its genes, its modules, the plug-in record."""
    from forge import plugins
    from forge.genomes import genes
    from forge.lm import hooks

    hooks.forget("tests.ext")  # the one way onto Block.hooks / OP_HOOKS is hooks.hook(), so the one way off
    for name in GENES:
        genes.unregister(name)
    for name in [m for m in sys.modules if m.startswith("tests.ext.")]:
        del sys.modules[name]
        globals().pop(name.rpartition(".")[2], None)  # `from tests.ext import genes` imports it again
    plugins._modules[:] = [m for m in plugins._modules if not m.startswith("tests.ext")]
    for paths in plugins._registered.values():  # what the API registered for the user's objects (plugins.bind)
        paths.difference_update({p for p in paths if p.startswith("tests.ext")})
    for path in [p for p in plugins._bound if p.startswith("tests.ext")]:
        del plugins._bound[path]
