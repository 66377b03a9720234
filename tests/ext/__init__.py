"""A researcher's extension of Forge, written outside the package: it reaches every command only through
`plugins.modules=[tests.ext.genes]` (or an installed `forge.plugins` entry point), never by editing Forge."""
from __future__ import annotations

import sys

GENES = ("glu",)


def forget() -> None:
    """Undo the extension in this process (a test's teardown): its genes, its modules, the plug-in record."""
    from forge import genes, plugins

    for name in GENES:
        genes.unregister(name)
    for name in [m for m in sys.modules if m.startswith("tests.ext.")]:
        del sys.modules[name]
    plugins._modules[:] = [m for m in plugins._modules if not m.startswith("tests.ext")]
