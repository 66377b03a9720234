"""Forge-DSE: NSGA-II search over IHA genomes (LLMForge §3.3.1, Algorithm 3) on pymoo.

operators (layer-aware variation) · objectives (objectives by name and direction: loss, model and workload
totals, backend metrics, user functions) · problem (vectorized evaluation, constraints) · algorithms
(nsga | random) · archive (Pareto archive, hypervolume) · coevolution (surrogate refits, through the
evaluator's narrow `SurrogateSlot`) · runner (the
generation loop, run files) · state (checkpoint/resume) · report · export · cli (forge-search,
forge-report, forge-export).
The top of the import order: it may import `surrogate`, `backends` and the `forge` core; nothing imports it.
"""
