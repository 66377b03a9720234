"""The language model a genome describes: its PyTorch form and its analytic workload.

model (the IHA decoder, nanoGPT-style, one file: the one source of a gene's meaning, which the HF export
assembles from) · model_state (its `IHAConfig` and `KVCache`: plumbing the export does not ship) · workload
(the one source of operators, parameters, FLOPs and bytes, used by every backend) · windows (keys attended
under the sliding-window gene, in closed form) · hooks (a plug-in gene's model and workload hooks, run in one
declared order, and the check that the workload counts what the model builds) · hook_export (what a model hook
takes into the HF export).

May import forge.genomes, forge.spaces (the population arrays), forge.plugins (a hook's `PluginError`) and
forge.errors.
"""
