"""Build the search's parts from a plain config: space, backend, workload, evaluator, anchor.

Plug-ins come from Hydra nodes with `_target_` (conf/backend/*.yaml, a trainer from conf/dispatch),
or from plain names: `evaluator.predictor` is a checkpoint name/path for
`surrogate.loading.load_predictor` (or a `_target_` node, which the tests use for fakes). Every `_target_`
and import path resolves through `forge.plugins`, so a resumed or verified run's saved config names no code.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from backends.interface import Workload
from forge import plugins
from forge.runtime.config import group_names, group_yaml
from forge.genomes.genome import Genome
from forge.genomes.importers import load_genome
from forge.genomes.precision import PrecisionError, QuantPenalty
from forge.spaces.space import SearchSpace, load_space, space_from_config
from search.evaluators import LossEvaluator, TrainEvaluator
from search.errors import SearchConfigError
from forge.disk import run_folder

log = logging.getLogger(__name__)


def _group_names(group: str) -> str:
    return ", ".join(group_names(group)) or "none yet"


def _instantiate(kind: str, node: Mapping[str, Any], **kwargs: Any) -> Any:
    try:
        return plugins.instantiate(kind, node, **kwargs)
    except plugins.PluginError as e:
        raise SearchConfigError(str(e)) from None


def build_space(cfg: Mapping[str, Any]) -> SearchSpace:
    node = cfg.get("space", "iha-paper")
    return load_space(node) if isinstance(node, str) else space_from_config(node)


def backend_of(cfg: Mapping[str, Any]) -> Any:
    """The run config's backend: conf/backend/<name>.yaml (or a `_target_` node) built by the backends' registry
    (`backends.registry.build_backend`, validated options); a refused one is a search config error."""
    from backends.interface import BackendError
    from backends.registry import build_backend

    node = cfg.get("backend", "roofline")
    try:
        backend = build_backend(node if isinstance(node, str) else dict(node))
    except BackendError as e:
        raise SearchConfigError(f"backend: {e}") from None
    if not callable(getattr(backend, "evaluate", None)):  # a user's `_target_` class: its interface, checked here
        raise SearchConfigError(f"backend: {type(backend).__name__} is not a backend: it has no evaluate(genomes, "
                                "workload); allowed: a class with evaluate() returning a CostTable "
                                "(backends.interface.Backend)")
    return backend


def build_workload(cfg: Mapping[str, Any], backend: Any = None) -> Workload:
    """Table 6 workload; precision bits left null follow the backend's defaults (bf16 GPU, int8 accelerators)."""
    from backends.registry import resolve_workload

    node = {k: v for k, v in dict(cfg.get("workload") or {}).items() if k != "_target_"}
    return resolve_workload(node, backend)


def check_predictor_space(predictor: Any, space: SearchSpace, name: str) -> None:
    """Refuse a surrogate trained for another space (globals or depth differ)."""
    sp = getattr(predictor, "space", None)
    if not isinstance(sp, Mapping):
        return
    bad = [k for k in ("d_model", "block_size", "vocab_size") if k in sp and int(sp[k]) != getattr(space, k)]
    if "L_max" in sp and int(sp["L_max"]) < space.L_max:
        bad.append("L_max")
    if bad:
        have = {k: sp.get(k) for k in ("name", "d_model", "block_size", "vocab_size", "L_max")}
        raise SearchConfigError(f"surrogate {name!r} does not match space {space.name!r} ({', '.join(bad)} differ): "
                                f"it was trained for {have}; allowed: a checkpoint trained on this space")


def predictor_name(node: Any) -> str:
    """How a run names its predictor: a checkpoint name or path, a `_target_`, or a Python object's class."""
    if isinstance(node, Mapping):
        return str(node.get("_target_"))
    return "auto" if node is None else str(node) if isinstance(node, (str, Path)) else type(node).__name__


def resolve_predictor(node: Any, space: SearchSpace | None, allow_blind: Any = None) -> tuple[Any, dict[str, Any]]:
    """`evaluator.predictor` with `auto` resolved (search.blind.resolve_auto), and the record summary.json, the
    report and the card name it by ({name, requested, note}: a note when auto passed over a blind checkpoint,
    which is also said on the console)."""
    requested, note = predictor_name(node), None
    if node is None or (isinstance(node, str) and node == "auto"):
        from search.blind import resolve_auto

        if space is None:
            raise SearchConfigError("evaluator.predictor=auto needs a space; allowed: a checkpoint name or path")
        node, note = resolve_auto(space, allow_blind)
        if note:
            log.warning("%s", note)
    return node, {"name": predictor_name(node), "requested": requested, **({"note": note} if note else {})}


def load_surrogate(node: Any, space: SearchSpace | None, allow_blind: Any = None, labels: Any = None,
                   seed: int = 0) -> Any:
    """`evaluator.predictor`: a `_target_` node, a conf/surrogate name (a recipe, fitted on `labels`), a
    checkpoint name/path, `auto` (the space's shipped checkpoint, search.blind) or (Python API) a surrogate
    object; checked against `space` (globals, depth, genes and values it cannot see) when one is given. The blind
    genes the user allowed are set on the predictor as `blind_genes`."""
    from search import user_surrogate
    from search.blind import check_blind, varied
    from surrogate.interface import as_loss_predictor

    node = resolve_predictor(node, space, allow_blind)[0]
    name = predictor_name(node)
    recipe = user_surrogate.recipe(node)
    node = recipe or node
    if not isinstance(node, (str, Path)):  # a user's surrogate: anything with predict (surrogate.interface)
        model = user_surrogate.build(node, space, seed)
        try:
            pred = as_loss_predictor(user_surrogate.ready(model, name, space, labels, seed, fresh=recipe is not None))
        except TypeError as e:
            raise SearchConfigError(f"evaluator.predictor: {e}; allowed: a class with predict(genomes)") from None
    else:
        from surrogate.loading import load_predictor

        pred = load_predictor(str(node))
    if space is not None:
        check_predictor_space(pred, space, name)
        blind = check_blind(pred, varied(space), allow_blind, name, f"space {space.name!r} varies", space)
        if blind:
            pred.blind_genes = blind
    return pred


def build_trainer(cfg: Mapping[str, Any], node: Any = None, store: Path | None = None) -> Any:
    """A Trainer: an explicit `_target_` node, else conf/dispatch (`dispatch`) with `protocol` and `corpus`."""
    if isinstance(node, Mapping) and "_target_" in node:
        return _checked(_instantiate("dispatch", node, _partial_=True, _convert_="all"), "trainer", ())()
    disp = node if isinstance(node, str) else cfg.get("dispatch")
    if isinstance(disp, str):
        disp = _group_yaml("dispatch", disp)
    if not isinstance(disp, Mapping) or not cfg.get("protocol") or not cfg.get("corpus"):
        raise SearchConfigError("training needs dispatch, protocol and corpus configs; allowed: dispatch="
                                f"{_group_names('dispatch')}, protocol={_group_names('protocol')}, "
                                f"corpus={_group_names('corpus')}")
    factory = _checked(_instantiate("dispatch", disp, _partial_=True, _convert_="all"), "dispatch")
    trainer = factory(protocol=dict(cfg["protocol"]), corpus=dict(cfg["corpus"]),
                      store=str(store) if store is not None else None)
    if store is not None and "://" not in str(store) and callable(getattr(trainer, "place_under", None)):
        trainer.place_under(Path(store).parent)  # submitit's logs in the run folder (dispatch.place), not here
    return trainer


def _checked(factory: Any, where: str, supplied: tuple[str, ...] = ("protocol", "corpus", "store")) -> Any:
    try:
        return plugins.checked_factory(factory, where, supplied)
    except plugins.PluginError as e:
        raise SearchConfigError(str(e)) from None


def _group_yaml(group: str, name: str) -> dict[str, Any]:
    node = group_yaml(group, name)
    if node is None:
        raise SearchConfigError(f"{group} = {name!r} is unknown; allowed: {_group_names(group)}")
    return node


def import_callable(spec: str, kind: str = "finetune") -> Any:
    """'package.module.func' or 'package.module:func' → the function, if an allowed `kind` plug-in."""
    try:
        return plugins.resolve(kind, spec)
    except plugins.PluginError as e:
        raise SearchConfigError(str(e)) from None


def build_coevolution(cfg: Mapping[str, Any], space: SearchSpace, run_dir: Path) -> Any:
    """None when search.coevolve.every is 0; else the CoEvolution plug-in (surrogate mode only). `cfg` is settled
    (search.settings.settle_config): its search.coevolve holds every knob."""
    from search.coevolution import CoEvolution, replay_labels

    co = cfg["search"]["coevolve"]
    every = int(co["every"] or 0)
    if every <= 0:
        return None
    if cfg["evaluator"]["kind"] != "surrogate":
        raise SearchConfigError("search.coevolve.every > 0 needs evaluator.kind=surrogate (train mode has no surrogate)")
    base, ft_spec = refit_source(cfg, space)
    if isinstance(base, Mapping) and base.get("_object_"):  # a Python object no config rebuilds (python_objects)
        raise SearchConfigError(f"search.coevolve.every > 0 refits a fresh {base.get('_target_')} built from its "
                                f"config, and that object cannot be rebuilt ({base['_object_']}); allowed: a surrogate "
                                "whose arguments read back (get_params()), or search.coevolve.every=0")
    finetune = import_callable(ft_spec)  # checked before anything is built
    from forge.shell.tracking import logged, node_for
    from surrogate.loading import load_predictor

    trainer = build_trainer(cfg, co.get("trainer"), Path(run_dir) / run_folder.LABEL_DB)
    logger = node_for(cfg.get("logger"), run_dir, "forge-search")  # trainings and refits log into <run>/logs
    if hasattr(trainer, "logger"):
        trainer.logger = logger
    load = load_predictor if ft_spec == "surrogate.fit.finetune" else None
    knobs = {"batch": int(co["batch"]), "n_mc": int(co["n_mc"]), "ratio": float(co["ratio"]), "epochs": int(co["epochs"]),
             "lr": float(co["lr"]), "batch_size": int(co["batch_size"]), "acquire": str(co["acquire"])}
    if co.get("stop"):  # issue 52: the stopping rule on co-evolution's trainings (search.coevolution_stop)
        from search.coevolution_stop import stop_knobs

        knobs["stop"] = stop_knobs(co["stop"], cfg, trainer, Path(run_dir))
    mode = str(co.get("mode") or "sync")
    cls = CoEvolution
    if mode != "sync":  # issue 54: W trainings in flight, no barrier per event (search.coevolution_async)
        from search.coevolution_async import MODES, AsyncCoEvolution

        if mode not in MODES:
            raise SearchConfigError(f"search.coevolve.mode = {mode!r}; allowed: {' | '.join(MODES)}")
        cls = AsyncCoEvolution
    return cls(every, trainer, logged(finetune, logger), base, replay_labels(co.get("replay"), space.name),
               **knobs, seed=int(cfg.get("seed", 0)), load=load)


def refit_source(cfg: Mapping[str, Any], space: SearchSpace) -> tuple[Any, str]:
    """What co-evolution and `forge-verify refit=true` refit (the run's surrogate: `auto` is the space's shipped one)
    and the finetune plug-in that does it, from a settled config: a checkpoint is fine-tuned from its frozen weights,
    a surrogate given as a config node is refitted, unless search.coevolve.finetune names another."""
    ev = cfg["evaluator"]  # settled (search.settings.settle_config): every key holds its value or the YAML's default
    base = ev["predictor"]
    if base in (None, "auto"):
        from search.blind import default_predictor

        base = default_predictor(space, ev.get("allow_blind"))
    default = "surrogate.generic.refit" if isinstance(base, Mapping) else "surrogate.fit.finetune"
    return base, cfg["search"]["coevolve"].get("finetune") or default


def build_evaluator(cfg: Mapping[str, Any], space: SearchSpace, store: Path | None = None, predictor: Any = None) -> Any:
    ev = cfg["evaluator"]  # settled (settle_config): a hand-made or older run's config reads the YAML's defaults
    kind = ev["kind"]
    try:  # evaluator.quant_penalty: {scale, table} (forge.genomes.precision.QuantPenalty); null = the paper model
        penalty = QuantPenalty.from_config(ev.get("quant_penalty"))
    except (PrecisionError, OSError) as e:
        raise SearchConfigError(f"evaluator.quant_penalty: {e}") from None
    if kind == "surrogate":
        allow = tuple(map(str, ev.get("allow_blind") or ()))  # gene names: plain strings from here on
        node, named = resolve_predictor(predictor if predictor is not None else ev["predictor"], space, allow)
        pred = load_surrogate(node, space, allow, ev.get("labels"), int(cfg.get("seed", 0)))
        out = LossEvaluator(pred, beta=float(ev["beta"]), n_mc=int(ev["n_mc"]), seed=int(cfg.get("seed", 0)),
                            penalty=penalty, level=ev["interval_level"], select=str(ev["select"]),
                            allow_blind=allow, name=named["name"])
        out.blind = list(getattr(pred, "blind_genes", ()))  # genes the loss cannot see (allowed by the user)
        out.named = named  # the resolved predictor, for summary.json's `loss_predictor`
        return out
    if kind == "train":
        return TrainEvaluator(build_trainer(cfg, ev.get("trainer"), store), penalty=penalty)
    raise SearchConfigError(f"evaluator.kind = {kind!r} is unknown; allowed: surrogate | train")


def seed_genome(spec: Any, space: SearchSpace) -> Genome | None:
    """`search.sampling`: 'uniform', or a genome to sample around (a path or a data/archs name)."""
    if spec in (None, "", "uniform"):
        return None
    path = Path(str(spec))
    if not path.is_file():
        from forge.runtime.config import data_dir

        path = data_dir() / "archs" / f"{spec}.yaml"
    if not path.is_file():
        raise SearchConfigError(f"genome {spec!r} (search.sampling / hv.anchor) is invalid; allowed: a genome "
                                "file or a name from data/archs (sampling also: uniform)")
    return space.repair(load_genome(path))
