"""Run-time plumbing every command shares: how a `forge-*` process starts, is configured and reports.

entry (console scripts: `--help`/`--version` before any heavy import) · app (`forge_main`: one error path and its
exit codes) · run_guard (what Hydra wrote for a refused command, taken back) · config (where configs and assets
live, what a config group holds) · limits (numeric option ranges) · launch_only (options only a launch may set) ·
needs (what training needs beyond the core install) · shadow (a user's `search/` folder never stands in for
Forge's) · signals (SIGTERM stops like Ctrl-C) · steps (n-of-m progress) · tracking (the Lightning logger every
training logs through) · parallel (seeded jobs on spawned one-thread workers) · numeric (machine-independent
numbers) · blame (an exception raised in a plug-in named as that plug-in's) · plugin_use (which plug-ins a run
uses: its `plugins.json`, required on it).

May import forge.errors and forge.disk; lazily, config reads the gene registry (forge.genomes.genes) to type a
global gene's override. Never spaces or the model. The command shell here (blame, plugin_use, tracking) also reads
forge.plugins and forge.lm.hooks, above runtime: the back arrows tests/test_layers.py lists by name.
"""
