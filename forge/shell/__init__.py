"""The command shell: how a `forge-*` process starts, fails and records what it used, on top of every other concept.

entry (console scripts: `--help`/`--version` before any heavy import) · app (`forge_main`: one error path and its
exit codes) · run_guard (what Hydra wrote for a refused command, taken back) · callbacks (the `MaskSecrets` Hydra
callback every forge-*.yaml names: passwords masked, the run folder noted for the guard) · blame (an exception
raised in a plug-in named as that plug-in's) · plugin_use (which plug-ins a run uses: its `plugins.json`, required
on it) · tracking (the Lightning logger every training logs through). It knows about hooks, genes and plug-ins,
which is why it stands above them, apart from the bottom helpers in forge.runtime (issue 57).

May import forge.errors, forge.disk, forge.genomes (a gene's declaring module), forge.runtime (config), forge.plugins
(the allowlist, a user's logger) and forge.lm (the hooks' modules); never the labelling or the CLIs, which are
built on it.
"""
