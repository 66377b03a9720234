"""`forge-verify run=<dir>`: really train and measure a search's picks, against a random control.

Picks are k members of the front; when the front holds fewer, the rest are the archive's next non-dominated
layers ("near-front:<layer>"), the candidates the search ranked next.

Picks and control come from `search.picks` (deterministic from the run and `seed`). Their loss is really
trained through the configured dispatch into a label store, so a killed verify resumes by skipping what
is stored (default store: the run's own `labels.db`, shared with co-evolution: same genome, same label).
Cost is re-measured by a measured backend where one matches the run's hardware; otherwise it stays
predicted and verify.json says so. `refit=true` fine-tunes the surrogate on the new labels as
co-evolution does (frozen base, label buffer + ρ:1 replay), reports the error on the picks before and
after, and saves the checkpoint in the run directory for `forge-search evaluator.predictor=<path>`.
"""
from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from forge import plugins
from forge.shell import plugin_use
from forge.disk.confined import inside, refuse_links
from forge.disk.full import refuse_full_disk
from forge.disk.lock import run_lock
from forge.genomes.genome import genome_from_dict
from forge.disk.io import atomic_write_json, check_writable
from forge.runtime.config import select
from forge.runtime.launch_only import check_saved
from forge.numeric import round_float, round_floats
from forge.genomes.labels import Label
from forge.disk.redact import mask
from search.build import build_cost, build_problem
from search.components import build_evaluator, build_space, build_trainer, build_workload, import_callable, refit_source
from search.picks import choose_picks, control_draw, near_front_picks
from search.evaluators import label_hook, strip_precision
from search.errors import SearchConfigError
from search.objectives import LOSS
from search.settings import settle_config
from search.state import CHECKPOINT, load_checkpoint, read_jsonl, require_complete
from search.verify_inputs import VerifyError, load_run, measured_backend, override_node
from surrogate.checkpoints import BLIND_WHY
from search.verify_report import (brief, figure, interval_of, real_figure, real_row, row_of,  # noqa: F401 (brief: the
                                  summarize, summarize_real)                                  # CLI's, kept here)
from surrogate.metrics import mae
from search.evaluated import VERIFIED
from forge.disk import run_folder

# A run's surrogate predicts the loss of its own protocol and corpus: only training under them checks it, so on a
# machine that cannot, verify a run made for this CPU (another protocol here would compare unlike losses)
CPU_VERIFY = "verify it on such a machine, or on this CPU a search made for it: {}, then {}"
OWN_VERIFY = "verify this run where its protocol trains (a run of your own space has no CPU-scale twin in conf/space)"


# what a run may not choose for its verification (its saved logger is never used: verify logs through its own; a
# key the command sets itself overrides the saved one, which is then not checked)
VERIFY_CHOICES = ("corpus", "dispatch", "evaluator.trainer")


def cpu_verify(recipe: list[str]) -> str:
    """What works instead of training here: a tiny search of the run's space family, none for a user's space."""
    return CPU_VERIFY.format(*recipe) if recipe else OWN_VERIFY


class Verify:
    """One verification of `run_dir`; `parts` may inject trainer/measure/finetune/evaluator/backend (tests), the
    run's own space and surrogate objects (the Python API)."""

    def __init__(self, cfg: Mapping[str, Any], parts: Mapping[str, Any] | None = None):
        self.cfg, parts = dict(cfg), dict(parts or {})
        self.run_dir = Path(str(self.cfg.get("run") or ""))
        if self.run_dir.is_dir():  # its labels.db and verify/ are written into: a planted link would lead outside
            refuse_links(self.run_dir)
        self.run_cfg, self.rows, self.summary = load_run(self.run_dir)
        try:  # a shared run folder is data: every class its config names must be an allowed plug-in, checked first
            injected = {"hydra", *parts, *(("dispatch", "search") if "trainer" in parts else ())}  # tests inject parts
            plugins.check_all({k: v for k, v in self.run_cfg.items() if k not in injected})
            check_saved({k: v for k, v in self.run_cfg.items() if k not in injected}, self.cfg,
                        f"run={self.run_dir}", f"forge-verify run={self.run_dir}",  # no shell line from disk
                        choices=tuple(k for k in VERIFY_CHOICES if select(self.cfg, k) is None))
        except plugins.PluginError as e:
            raise SearchConfigError(f"{self.run_dir}: {e}") from None
        require_complete(self.run_dir, bool(self.cfg.get("allow_partial", False)), "run")  # a partial front misleads
        self.run_cfg = settle_config(self.run_cfg)  # the run's settings over their one home of defaults (checked above)
        out = Path(self.cfg["out"]) if self.cfg.get("out") else inside(self.run_dir, self.run_dir / run_folder.VERIFY_DIR)
        self.out = check_writable(out, "out")  # before training
        from forge.shell.tracking import node_for

        self.logger = node_for(self.cfg.get("logger"), self.out, "forge-verify")  # <out>/logs; refused if missing
        if "trainer" not in parts and not self.cfg.get("trainer"):  # a GPU or extra this machine lacks: say so now
            from forge.runtime.needs import check_training

            from search.suggest import rel, tiny_recipe

            check_training(override_node("protocol", self.cfg.get("protocol"), self.run_cfg.get("protocol")) or {},
                           override_node("corpus", self.cfg.get("corpus"), self.run_cfg.get("corpus")) or {},
                           f"run={rel(self.run_dir)}", allowed=cpu_verify(tiny_recipe(self.run_cfg, self.run_dir)))
        self.k, self.n_control = int(self.cfg.get("k", 8)), int(self.cfg.get("control", self.cfg.get("k", 8)))
        if self.k < 1 or self.n_control < 0:
            raise VerifyError(f"k={self.k}, control={self.n_control}; allowed: k >= 1 and control >= 0")
        rc = self.run_cfg
        self.level = float(self.cfg.get("interval_level") or rc["evaluator"]["interval_level"])
        self.seed = int(self.cfg["seed"] if self.cfg.get("seed") is not None else rc.get("seed", 0))
        self.space = parts.get("space") or build_space(rc)
        default = self.run_dir / (run_folder.LABEL_DB if self.cfg.get("protocol") is None else run_folder.VERIFY_LABEL_DB)
        url = str(self.cfg.get("store") or "")
        self.store: Any = url if "://" in url else Path(url or default)  # a train-mode run's control trains into it
        if isinstance(self.store, Path):
            self.store.parent.mkdir(parents=True, exist_ok=True)
        cost = build_cost(rc, parts)  # a refused backend is refused before the surrogate loads
        self.evaluator = parts.get("evaluator") or self._evaluator(parts.get("predictor"))
        self.problem = build_problem(rc, self.space, self.evaluator, cost)  # the search's own builder parts
        self.objectives = list(self.summary.get("objectives") or rc["objectives"])
        self.latency = "tpot_ms" if "tpot_ms" in self.objectives else next(
            (o for o in self.objectives if o != LOSS), "tpot_ms")
        self.measure, self.cost_note = ((parts["measure"], "cost measured (injected backend)") if "measure" in parts
                                        else measured_backend(rc, self.cfg.get("measure", "auto")))
        self.trainer = parts.get("trainer") or self._trainer()
        self.finetune = parts.get("finetune")

    def _coevolution(self) -> dict[str, Any]:
        """The checkpoint's co-evolution state ({} without one); a corrupt checkpoint is refused, naming it."""
        has = (self.run_dir / CHECKPOINT).exists()
        return dict((load_checkpoint(self.run_dir).get("coevolution") or {}) if has else {})

    def _evaluator(self, predictor: Any = None) -> Any:
        """The run's evaluator, with co-evolution's last refitted surrogate when the run saved one; `predictor`: the
        surrogate object the run was made with (SearchResult.verify hands it again: search.python_objects)."""
        ev = build_evaluator(self.run_cfg, self.space, self.store, predictor)
        from search.coevolution import saved_predictor

        path = saved_predictor(self.run_dir, self._coevolution().get("predictor_path"))  # its own state/, never a path
        if path and path.with_suffix(".json").is_file() and hasattr(ev, "swap"):
            from surrogate.loading import load_predictor

            ev.swap(load_predictor(path))
        return ev

    def _trainer(self) -> Any:
        rc, c = self.run_cfg, self.cfg
        protocol = override_node("protocol", c.get("protocol"), rc.get("protocol"))
        node = {"dispatch": override_node("dispatch", c.get("dispatch"), rc.get("dispatch")), "protocol": protocol,
                "corpus": override_node("corpus", c.get("corpus"), rc.get("corpus"))}
        trainer = build_trainer(node, c.get("trainer"), self.store)
        if hasattr(trainer, "weights_dir"):  # the trained picks, for `forge-export weights=<out>/weights`
            trainer.weights_dir = str(self.out / run_folder.WEIGHTS_DIR)
        if hasattr(trainer, "logger"):
            trainer.logger = self.logger
        return trainer

    # ------------------------------------------------------------ the job
    def choose(self) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
        """`pick=best` (default: the k best-predicted) or `pick=spread`, topped up from the archive's next layers
        when the front is smaller than k; then the control."""
        if self.cfg.get("tier") is not None:  # issue 44's option, replaced: say what replaced it
            raise VerifyError(f"tier={self.cfg['tier']!r} is gone (tiers said 'cannot tell apart' where the odds "
                              "said otherwise); allowed: pick=best (default: the k best-predicted) | pick=spread")
        picks = choose_picks(self.rows, self.objectives, self.k, str(self.cfg.get("pick") or "best"))
        if len(picks) < self.k and (self.run_dir / run_folder.ARCHIVE).is_file():
            picks += near_front_picks(read_jsonl(self.run_dir / run_folder.ARCHIVE), self.problem.objectives,
                                      self.problem.signs, [r["id"] for _, r in picks], self.k - len(picks))
        control = control_draw(self.space, self.problem, self.n_control, self.seed,
                               exclude=[r["id"] for _, r in picks]) if self.n_control else []
        return picks, control

    def train(self, recs: list[dict[str, Any]], roles: Mapping[str, str] | None = None) -> dict[str, Label]:
        """Real labels of `recs`, one progress step per trained genome (stored ones are reused silently)."""
        from forge.runtime.steps import Steps

        genomes = strip_precision([genome_from_dict(r["genome"]) for r in recs])
        role = {g.id: (roles or {}).get(r["id"], "genome") for g, r in zip(genomes, recs)}
        what = f"training under {(self.protocol() or {}).get('name', 'the run protocol')}"
        with Steps("forge-verify", what, len(genomes), enabled=bool(self.cfg.get("progress", False))) as st:
            def on_label(lab: Label) -> None:
                st.step(f"{role.get(lab.genome_id, 'genome')} {lab.genome_id[:8]}: loss {lab.label:.3f}")
            with label_hook(self.trainer, on_label):
                # rounded as a search rounds its surrogate (forge.numeric): coverage and error decisions see 6 digits
                return {r["id"]: replace(lab, label=round_float(lab.label))
                        for r, lab in zip(recs, self.trainer.train(genomes))}

    def protocol(self) -> Any:
        return override_node("protocol", self.cfg.get("protocol"), self.run_cfg.get("protocol"))

    def measure_all(self, recs: list[dict[str, Any]]) -> dict[str, dict[str, float]] | None:
        if self.measure is None or not recs:
            return None
        genomes = [genome_from_dict(r["genome"]) for r in recs]
        rc = {**self.run_cfg, "workload": {**(self.run_cfg.get("workload") or {}), **(self.cfg.get("workload") or {})}}
        table = self.measure.evaluate(genomes, build_workload(rc, self.measure))
        return {r["id"]: round_floats(table.row(j)) for j, r in enumerate(recs)}

    @property
    def trained_run(self) -> bool:
        """The run's loss was itself trained (evaluator.kind=train): no prediction exists to check."""
        return getattr(self.evaluator, "kind", "") == "train"

    def run(self) -> dict[str, Any]:
        if self.trained_run and self.cfg.get("refit"):
            raise VerifyError(f"refit=true: {self.run_dir} trained every candidate (evaluator.kind=train), so it has "
                              "no surrogate to fine-tune; allowed: refit=false, or verify a surrogate run")
        picks, control = self.choose()
        recs = [r for _, r in picks] + control
        roles = {**{r["id"]: "control" for r in control}, **{r["id"]: f"pick {role}" for role, r in picks}}
        if self.cfg.get("race"):  # issue 52: race the picks (search.race), train the control in full
            from search.race import verify_race

            raced = verify_race(self, [r for _, r in picks], roles)
            labels = {**raced, **(self.train(control, roles) if control else {})}
        else:
            labels = self.train(recs, roles)
        refuse_full_disk(labels.values(), self.out)  # a training that could not write is no loss to report
        measured = self.measure_all(recs)
        roles = [*picks, *(("control", r) for r in control)]
        P, C, summary = (self._real_rows(roles, labels, measured) if self.trained_run
                         else self._checked_rows(roles, labels, measured, len(picks)))
        out = {"run": str(self.run_dir), "space": self.space.name, "seed": self.seed, "k": self.k,
               "pick": str(self.cfg.get("pick") or "best"),
               **({"loss_pairwise": {k: pw.get(k) for k in ("predictor", "provenance", "groups")}}
                  if isinstance(pw := self.summary.get("loss_pairwise"), dict) else {}),
               "front_size": len(self.rows), "loss": self._loss_note(),
               **({"loss_blind_to": blind} if (blind := list(getattr(self.evaluator, "blind", ()))) else {}),
               "cost": self.cost_note, "latency": self.latency, "store": mask(str(self.store)),
               "summary": summary, "picks": P, "control": C}
        if self.cfg.get("refit"):
            out["refit"] = self.refit(P + C, labels)
        self.out.mkdir(parents=True, exist_ok=True)
        write_verified(self.out, roles)  # the genomes themselves: forge-export select=id: takes any of them
        out["figure"] = str(self._figure(P, C, summary, measured is not None))
        out = round_floats(out)  # fixed digits: the same report on every machine
        atomic_write_json(self.out / run_folder.VERIFY_JSON, out)
        return out

    def _checked_rows(self, roles: list, labels: dict[str, Label], measured: dict | None,
                      n_picks: int) -> tuple[list, list, dict[str, Any]]:
        """Predicted vs real per genome and over the picks (a surrogate run)."""
        pred = getattr(self.evaluator, "predictor", None)
        rows, methods = [], set()
        for role, rec in roles:
            lo, hi, how = interval_of(rec, pred, self.level)
            methods.add(how)
            rows.append(row_of(role, rec, float(labels[rec["id"]].label), lo, hi, self.latency,
                               measured.get(rec["id"]) if measured else None))
        seen = {d.get("genome_id") for d in self._coevolution().get("buffer") or []}
        for r in rows:  # co-evolution trained these and refitted on them: not unseen by the final surrogate
            r["seen_by_refit"] = r["id"] in seen
        P, C = rows[:n_picks], rows[n_picks:]
        method = (self.summary.get("loss_interval") or {}).get("method") or (
            "none: no calibrated interval in this run, drawn as mu ± 0" if methods == {"none"} else "predictor.interval")
        s = summarize(P, C, self.latency, measured is not None, self.level, method)
        unseen = [r for r in P if not r["seen_by_refit"] and r["real_loss"] != "inf"]
        s.update(n_seen_by_refit=sum(r["seen_by_refit"] for r in P),
                 mae_unseen=float(np.mean([abs(r["mu"] - r["real_loss"]) for r in unseen])) if unseen else None)
        return P, C, s

    def _real_rows(self, roles: list, labels: dict[str, Label], measured: dict | None) -> tuple[list, list, dict]:
        """Real loss and latency only (a train-mode run): the picks against the control."""
        rows = [real_row(role, rec, float(labels[rec["id"]].label), self.latency,
                         measured.get(rec["id"]) if measured else None) for role, rec in roles]
        P = [r for r in rows if r["role"] != "control"]
        C = [r for r in rows if r["role"] == "control"]
        return P, C, summarize_real(P, C, self.latency, measured is not None)

    def _figure(self, P: list, C: list, s: dict[str, Any], measured: bool) -> Path:
        if self.trained_run:
            b = s["best_real_loss"]
            title = (f"{self.space.name}: {len(P)} front picks vs {len(C)} control, real only "
                     f"(best {_fmt(b['picks'])} vs {_fmt(b['control'])})")
            return real_figure(self.out / run_folder.VERIFY_PNG, P, C, self.latency, measured, title)
        rho = "n/a" if s["spearman"] is None else f"{s['spearman']:.2f}"
        cov = "n/a" if s["coverage"] is None else f"{s['coverage']:.0%}"
        title = f"{self.space.name}: {len(P)} front picks, Spearman {rho}, coverage {cov} at {self.level:.0%}"
        return figure(self.out / run_folder.VERIFY_PNG, P, C, title)

    def _loss_note(self) -> str:
        if self.trained_run:
            return ("the run's loss was itself trained (evaluator.kind=train): the picks' labels are re-read from the "
                    "store and no prediction is checked; reported: the picks' real loss and latency against the "
                    "control's")
        from search.summary import predictor_label

        label = predictor_label(getattr(self.evaluator, "named", None)) or "the run's surrogate"
        blind = list(getattr(self.evaluator, "blind", ()))  # allowed by the run (evaluator.allow_blind)
        return (f"predicted by {label}; real = trained under the run's protocol" + (
            f". The predictions were BLIND to {', '.join(blind)}: {BLIND_WHY}" if blind else ""))

    # ------------------------------------------------------------ refit
    def refit(self, rows: list[dict[str, Any]], labels: dict[str, Label]) -> dict[str, Any]:
        """Fine-tune from the frozen base on co-evolution's buffer + the new finite labels (ρ:1 replay)."""
        from forge.shell.tracking import logged
        from search.coevolution import replay_labels

        co = self.run_cfg["search"]["coevolve"]  # settled: every knob holds its value or conf/search/nsga.yaml's
        base, spec = refit_source(self.run_cfg, self.space)
        ft = logged(self.finetune or import_callable(spec), self.logger)
        buf = self._coevolution().get("buffer") or []
        buffer = {lab.genome_id: lab for lab in (Label.from_json(json.dumps(d)) for d in buf)}
        new = [labels[r["id"]] for r in rows if labels[r["id"]].finite]
        buffer.update({lab.genome_id: lab for lab in new})
        if not new:
            return {"refit": False, "reason": "no finite new labels"}
        predictor = ft(base, list(buffer.values()), replay_labels(co.get("replay"), self.space.name),
                       seed=self.seed, ratio=float(co["ratio"]), epochs=int(co["epochs"]), lr=float(co["lr"]),
                       batch=int(co["batch_size"]))
        picks = [r for r in rows if r["role"] != "control" and r["real_loss"] != "inf"]
        y = np.array([r["real_loss"] for r in picks], float)
        after = np.asarray(predictor.predict([labels[r["id"]].genome for r in picks], n_mc=0)[0], float)
        before = np.array([r["mu"] for r in picks], float)
        res = {"refit": True, "n_new": len(new), "n_buffer": len(buffer), "mae_before": mae(y, before),
               "mae_after": mae(y, after), "note": "error on the picks, which the refit trained on (in-sample)"}
        if hasattr(predictor, "save"):
            stem = self.out / "surrogate-verified"
            predictor.save(stem)
            from search.suggest import quote, rel

            res.update(checkpoint=str(stem), use=f"forge-search evaluator.predictor={quote(rel(stem))} ...")
        return res


def write_verified(out: Path, roles: list) -> None:
    """<out>/verified.jsonl: each trained genome with its role, genome and the run's metrics for it, so an export
    of a control or near-front pick (not in pareto.jsonl) finds its genome beside the weights it trained."""
    from forge.disk.io import atomic_write_text, json_line

    atomic_write_text(out / VERIFIED, "".join(json_line({"id": r["id"], "role": role, "genome": r["genome"],
                                                         "metrics": r["metrics"], "design": r.get("design")}) + "\n"
                                              for role, r in roles))


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def run(cfg: Any, parts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    from forge.runtime.config import to_container

    plugins.trust(cfg)  # the live config only: the run's config.yaml and checkpoint are data
    run_dir = Path(str(cfg.get("run") or ""))
    with run_lock(run_dir) if cfg.get("run") and run_dir.is_dir() else nullcontext():  # its labels.db, verify/
        if cfg.get("run"):
            plugin_use.require(cfg.get("run"), code=True)  # the run's plug-ins, imported only by the live config
        return Verify(to_container(cfg), parts).run()
