"""The Python API: `forge.search`, `forge.cost`, `forge.predict` for notebooks and scripts.

It is the CLIs with Python arguments: every call composes the same Hydra config the command line composes
(`hydra.compose` on conf/forge-<app>.yaml) and calls the same `run(cfg)`, so a call and its command write
the same files. It sits at the top of the import order, in `search` (it calls search, surrogate and backends); the
names reach `forge` through `forge/__init__`'s `__getattr__`, which imports this module on first use (the core's one
upward import, docs/concepts/layout.md), so `import forge` stays light.

    import forge
    res = forge.search(space="iha-tiny", backend="roofline", objectives=["val_loss", "ttft_ms", "params"],
                       search={"generations": 3}, out_dir="runs/demo")
    res.front            # pandas DataFrame: one row per Pareto member, metrics and loss interval as columns
    res.export(select="knee", out="exported/")

Results come back as pandas DataFrames (`pip install -e ".[api]"` in the Forge clone). Bad arguments are refused as the CLI
refuses them (unknown keys with the closest valid name, types, ranges: search.api_args), and every refusal is a
`forge.errors.ForgeError` with the command's one-line message.
"""
from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

from search.api_args import api_errors, as_list, check_number, check_path
from search.api_compose import compose
from search.errors import SearchConfigError
from forge.errors import UserError, check_int
from forge.genomes.genome import Genome
from search.result import SearchResult, pandas_or_refuse
from forge.disk import run_folder

# ------------------------------------------------------------------------------------------ calls
@api_errors
def search(space: str | Mapping[str, Any] | None = None, backend: Any = None,
           objectives: Sequence[Any] | None = None, constraints: Sequence[str] | None = None,
           out_dir: str | Path | None = None, overrides: Sequence[str] = (), **values: Any) -> SearchResult:
    """Run `forge-search` with these choices; unnamed settings keep the CLI's defaults.

    `values` are any other keys of conf/forge-search.yaml (`seed=1`, `search={"generations": 5}`,
    `evaluator={"predictor": "forgeformer-iha-tiny"}`, `workload="agentic-90k"`); `overrides` are
    command-line strings (`["search.pop_size=8"]`). The run folder is `out_dir` (default
    outputs/search/<time>, as the CLI's); the progress bar is off unless `progress=True`.

    Python objects go where the config holds names: a space object (`space=MySpace(...)`), a function objective
    (`objectives=["val_loss", my_metric, {"name": "mem", "fn": memory, "params": {"batch": 8}}]`) and a surrogate
    object (`evaluator={"predictor": my_model}`; unfitted, it is fitted on `evaluator.labels`) and a backend object
    (`backend=MyBackend(...)`: anything with `evaluate(genomes, workload)`). `resume=<run>` continues a run,
    comparing only the arguments given (hand the same objects again: search.python_objects)."""
    import sys

    from search.cli import run
    from search.python_objects import given_keys, split_objects, start_note

    objectives = [objectives] if callable(objectives) else as_list("objectives", objectives)
    given = given_keys(dict(values, space=space, backend=backend, objectives=objectives, constraints=constraints),
                       overrides)  # what a resume compares with the run's own config
    space, objectives, values, parts = split_objects(space, objectives, values)
    backend = _backend_object(backend, parts)
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")  # as conf's ${now:}: two runs in one second differ
    out = check_path("out_dir", out_dir) if out_dir else Path("outputs/search") / stamp
    cfg = compose("forge-search", overrides, space=space, backend=backend, objectives=as_list("objectives", objectives),
                  constraints=as_list("constraints", constraints), out_dir=str(out), **{"progress": False, **values})
    note = None if values.get("resume") else start_note(_container(cfg), out)
    if note:
        print(note, file=sys.stderr)
    summary = run(cfg, parts, given if values.get("resume") else None)
    return SearchResult(Path(summary["run_dir"]), summary, parts)


def _backend_object(backend: Any, parts: dict[str, Any]) -> Any:
    """A backend object (anything with `evaluate(genomes, workload)`, backends.interface.Backend) goes into the
    search's parts as a space or surrogate object does; the config names its class. Else `backend` unchanged."""
    if backend is None or isinstance(backend, (str, Mapping)):
        return backend
    if not callable(getattr(backend, "evaluate", None)):
        raise UserError(f"backend={backend!r} is invalid; allowed: a config name in conf/backend/ (a string), a "
                        "mapping with _target_, or a backend object with evaluate(genomes, workload)")
    from forge import plugins

    parts["backend"], cls = backend, type(backend)
    path = f"{cls.__module__}.{cls.__qualname__}"
    plugins.register("backend", path)  # the caller's class: verify or report in this process may name it
    return {"_target_": path}


@api_errors
def load(run_dir: str | Path) -> SearchResult:
    """A SearchResult for an existing run folder, checked as forge-export and forge-verify check it."""
    from search.run_files import refuse_odd
    from search.run_files import read_summary
    from search.state import read_jsonl

    d = check_path("run_dir", run_dir)
    refuse_odd(d, (run_folder.SUMMARY, run_folder.PARETO), UserError)  # a FIFO is named as one, not "not there"
    if not (d / run_folder.SUMMARY).is_file() or not (d / run_folder.PARETO).is_file():
        raise UserError(f"{run_dir}: no summary.json/pareto.jsonl there; allowed: a forge-search run folder")
    summary = read_summary(d)  # a JSON object, else one line naming the file
    bad = [k for k, t in (("status", str), ("hypervolume", (int, float))) if not isinstance(summary.get(k), t)]
    if bad:
        raise UserError(f"{d / run_folder.SUMMARY}: corrupt summary (missing or mistyped {', '.join(bad)}); allowed: "
                        "the summary.json forge-search wrote")
    read_jsonl(d / run_folder.PARETO)  # a corrupt line is refused, naming it
    return SearchResult(d, summary)


def genomes_of(items: Genome | str | Path | Sequence[Genome | str | Path]) -> list[Genome]:
    """Genomes, genome files, or names from data/archs (as `forge-hw arch=` takes them)."""
    from forge.cli import resolve_arch

    allowed = "a Genome, a genome file, a name from data/archs, or a list of them"
    seq = [items] if isinstance(items, (Genome, str, Path)) else items
    if not isinstance(seq, (list, tuple)) or not seq:
        raise UserError(f"genomes={items!r} is invalid; allowed: {allowed}")
    bad = [g for g in seq if not isinstance(g, (Genome, str, Path))]
    if bad:
        raise UserError(f"genomes: {bad[0]!r} is invalid; allowed: {allowed}")
    return [g if isinstance(g, Genome) else resolve_arch(str(g)) for g in seq]


@api_errors
def cost(genomes: Any, backend: Any = "roofline", workload: str | Mapping[str, Any] | None = None,
         overrides: Sequence[str] = (), **values: Any) -> Any:
    """Hardware cost of genomes on a backend (a name, a `_target_` mapping or a backend object), built as the search
    builds it: one row per genome with
    ttft_ms, tpot_ms, energy_per_token_uj, feasible, reason and the backend's numeric extras."""
    from backends.interface import evaluated
    from forge import plugins
    from forge.lm.hooks import check_agreement
    from search.components import backend_of, build_workload

    parts: dict[str, Any] = {}
    node = _backend_object(backend, parts)
    c = _container(compose("forge-search", overrides, backend=node, workload=workload, **values))
    plugins.trust(c)  # the caller's config, as a command's: its plug-in modules first, then its classes
    gs = genomes_of(genomes)
    check_agreement(gs)  # plug-in hooks: the workload counts what the model builds, else one line
    be = parts.get("backend") or backend_of(c)
    table = evaluated(be, gs, build_workload(c, be), len(gs))
    rows = []
    for i, g in enumerate(gs):
        ex = table.extras[i] if table.extras else {}
        rows.append({"id": g.id, "name": g.name, **table.row(i), "feasible": bool(table.feasible[i]),
                     "reason": table.reason[i], **{k: v for k, v in ex.items() if _is_num(v)}})
    return pandas_or_refuse().DataFrame(rows)


@api_errors
def predict(genomes: Any, predictor: str | Mapping[str, Any] = "forgeformer-iha-paper-all", n_mc: int = 0,
            level: float = 0.9, seed: int = 0, allow_blind: Sequence[str] | None = None) -> Any:
    """Predicted loss of genomes, as the search's evaluator computes it: one row per genome with mu, sigma
    (n_mc MC-dropout passes; 0 = deterministic) and the calibrated interval loss_lo / loss_hi at `level`.
    Genomes using a gene, or a gene value, the predictor never saw are refused (search.blind.guard) unless
    `allow_blind` names the gene; then each row says which of them it uses in `loss_blind_to`."""
    from forge import plugins
    from forge.runtime.limits import RANGES, SEED_MAX
    from search.blind import blind_genes, covers, genome_grids
    from search.components import load_surrogate, predictor_name
    from search.evaluators import LossEvaluator

    if not isinstance(predictor, (str, Path, Mapping)):
        raise UserError(f"predictor={predictor!r} is invalid; allowed: a shipped checkpoint name or a path (a string), "
                        "or a mapping with _target_")
    n_mc = check_int("n_mc", n_mc, 0, RANGES["forge-search"]["evaluator.n_mc"][1])  # the CLI's evaluator.n_mc range
    seed = check_int("seed", seed, 0, SEED_MAX)
    level = check_number("level", level, 0.0, 1.0)
    allow_blind = as_list("allow_blind", allow_blind)
    plugins.trust({"evaluator": {"predictor": predictor}})  # the caller's own `_target_`, as forge.search
    gs = genomes_of(genomes)
    pred = load_surrogate(predictor, None)
    ev = LossEvaluator(pred, n_mc=n_mc, seed=seed, level=level, allow_blind=allow_blind, name=predictor_name(predictor))
    from forge.numeric import round_sig, settle

    try:
        _, mu, sigma = (settle(a) for a in ev(gs))  # the digits the search's problem keeps (forge.numeric)
    except SearchConfigError as e:  # a blind gene: said with this call's keyword, not the command line's key
        raise SearchConfigError(re.sub(r"evaluator\.allow_blind=\[([^\]]*)\]",
                                       lambda m: f"allow_blind={m.group(1).split(',')!r}", str(e))) from None
    lo, hi = (round_sig(a) for a in ev.interval(mu, sigma))
    cov = covers(pred) if allow_blind else None  # which allowed blind genes each row uses
    blind = [";".join(sorted(blind_genes(cov, genome_grids([g])))) for g in gs] if cov is not None else []
    return pandas_or_refuse().DataFrame({"id": [g.id for g in gs], "name": [g.name for g in gs], "mu": mu, "sigma": sigma,
                                "loss_lo": lo, "loss_hi": hi, **({"loss_blind_to": blind} if any(blind) else {})})


def _container(cfg: Any) -> dict[str, Any]:
    from forge.runtime.config import to_container

    return to_container(cfg)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
