"""Forge-DSE: NSGA-II search over IHA genomes (LLMForge §3.3.1, Algorithm 3) on pymoo.

operators (layer-aware variation) · objectives (objectives by name and direction: loss, model and workload
totals, backend metrics, user functions; `SearchConfigError`) · constraints (`val_loss < 3.8`) · problem (the
pymoo problem only: vectorized, cached evaluation, F and G) · evaluators (the loss: surrogate or real training)
· duplicates (pymoo's duplicate remover, by network) · algorithms (`ForgeNSGA2`: nsga | random) · archive (Pareto archive,
hypervolume) · coevolution (surrogate refits, through the evaluator's narrow `SurrogateSlot`) · runner (the
generation loop; building a `Search` runs nothing) · runlog (the files a run writes) · state (checkpoint/resume) ·
report (+ report_html, report_page) · export · cli (forge-search, forge-report, forge-export) · api (the Python API
behind `forge.search`; + api_compose, result).
The top of the import order: it may import `surrogate`, `backends` and the `forge` core; nothing imports it.
"""
