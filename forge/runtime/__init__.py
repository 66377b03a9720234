"""Run-time helpers every command shares: where configs live, option ranges, signals, progress, workers.

config (where configs and assets live, what a config group holds) · limits (numeric option ranges) · launch_only
(options only a launch may set) · needs (what training needs beyond the core install) · shadow (a user's `search/`
folder never stands in for Forge's) · signals (SIGTERM stops like Ctrl-C) · steps (n-of-m progress) · parallel
(seeded jobs on spawned one-thread workers). The command shell built on these (entry, app, the run-folder guard,
plug-in use, blame, tracking) is forge.shell; machine-independent numbers are forge.numeric (issue 57).

May import forge.errors and forge.disk; lazily, config reads the gene registry (forge.genomes.genes) to type a
global gene's override. Never plug-ins, spaces, the model or the shell.
"""
