"""`forge-label`: sample (or read) genomes, train each under a protocol, append the labels to a store.

    forge-label space=iha-tiny protocol=cpu-proxy n=300 seed=0 store=labels.db export=labels.jsonl
    forge-label -m seed=0,1,2 store=postgresql+psycopg://host/db    # Hydra multirun, any launcher
    forge-label status store=labels.db                               # done / diverged / failed per protocol

`run(cfg)` is the whole job (tests call it); `main` is the thin Hydra wrapper. Resuming is free: genomes
with a result under this protocol are skipped; failed ones are trained again (`retry=failed|all|none`).
`forge-label --help` lists every option.
"""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from forge import plugins
from forge.shell.app import EXIT_SIGINT, EXIT_SIGTERM, forge_main
from forge.runtime.config import output_dir, to_container
from forge.disk.files import require_file
from forge.genomes.genome import Genome, GenomeError, genome_from_dict
from forge.genomes.importers import load_genome
from forge.disk.io import atomic_write_json, check_writable, read_text, loads
from forge.genomes.labels import Label
from forge.runtime.signals import term_as_interrupt
from forge.runtime.steps import Steps, clock
from forge.spaces.space import space_from_config
from forge.labelling.status import where
from forge.labelling.dispatch import place
from forge.labelling.store import LabelStore
from forge.disk import run_folder


def read_genomes(path: str | Path) -> list[Genome]:
    """Genomes from .jsonl (label lines or bare genome dicts), .yaml/.yml, .csv (LLMForge) or a folder of YAML."""
    p = Path(path).expanduser()
    if p.is_dir():
        files = sorted([*p.glob("*.yaml"), *p.glob("*.yml")])
        if not files:
            raise GenomeError(f"genomes={p}: folder holds no .yaml genome files")
        return [load_genome(f) for f in files]
    if p.exists() and not p.is_file():
        require_file(p, "genomes file")  # a FIFO or socket: named as such (opening one would block)
    if not p.is_file():
        raise GenomeError(f"genomes={p}: file not found; allowed: .jsonl, .yaml, .csv or a folder of .yaml")
    if p.suffix == ".csv":
        from forge.genomes.importers import load_llmforge_csv

        return [r.genome for r in load_llmforge_csv(p)[0]]
    if p.suffix in (".yaml", ".yml"):
        return [load_genome(p)]
    out = []
    for n, line in enumerate(read_text(p, "genome file").splitlines(), start=1):
        if line.strip():
            try:
                d = loads(line)
                out.append(Label.from_json(line).genome if "label" in d else genome_from_dict(d.get("genome", d)))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as e:
                raise GenomeError(f"{p}:{n}: not a genome or label line ({e})") from None
    return out


def _genomes(cfg: DictConfig) -> list[Genome]:
    if cfg.get("genomes"):
        genomes = read_genomes(cfg.genomes)
        if not genomes:  # an empty file is a mistake, not a finished job
            raise GenomeError(f"genomes={cfg.genomes}: holds no genome; allowed: a file with at least one genome "
                              "(.jsonl lines, .yaml, .csv) or a folder of .yaml")
        check_depth(genomes, cfg)
        return genomes
    if int(cfg.n) < 1:
        raise GenomeError(f"n = {cfg.n} is invalid; allowed: a positive int (or genomes=FILE)")
    space = space_from_config(to_container(cfg.space))
    return space.sample(int(cfg.n), np.random.default_rng(int(cfg.seed)))


def check_depth(genomes: list[Genome], cfg: DictConfig) -> None:
    """A genome deeper than any space it could come from (the configured one, any shipped one) is refused before
    anything is built: 10,000 layers would allocate for minutes and end in a MemoryError."""
    from forge.runtime.config import conf_dir, group_yaml

    name = OmegaConf.select(cfg, "space.name") or "the configured space"
    limit = max([int(OmegaConf.select(cfg, "space.L_max") or 0),
                 *(int((group_yaml("space", p.stem) or {}).get("L_max") or 0) for p in conf_dir().glob("space/*.yaml"))])
    deep = next(((i, g) for i, g in enumerate(genomes, 1) if len(g.layers) > limit), None)
    if deep is not None:
        raise GenomeError(f"genomes={cfg.genomes}: genome {deep[0]} has {len(deep[1].layers):,} layers; allowed: at "
                          f"most {limit} (the largest L_max of {name} and the shipped spaces; space= names yours)")


def _out_dir(cfg: DictConfig) -> Path | None:
    return output_dir(cfg, fallback=None)


def _progress(new: list[Label], caught: dict[str, str], steps: Steps):
    def on_label(lab: Label) -> None:
        new.append(lab)
        if caught.get("signal"):  # a SIGTERM whose KeyboardInterrupt landed where Python ignores exceptions
            raise KeyboardInterrupt
        p = lab.provenance
        what = f"{lab.label:.4f}" if lab.finite else f"inf [{lab.status}] ({lab.reason[:80]})"
        steps.step(f"{lab.genome_id} label={what} wall={p.get('wall_s', '?')}s tok/s={p.get('tokens_per_s', '?')}")

    return on_label


def logger_node(cfg: Any) -> dict[str, Any] | None:
    """The Lightning logger of each training (forge.shell.tracking): conf `logger` (csv by default), its save_dir
    defaulting to <run dir>/logs; `logger=none` logs nothing; a missing package is refused here."""
    from forge.shell.tracking import node_for

    return node_for(to_container(cfg.get("logger")), _out_dir(cfg), "forge-label")


def run(cfg: DictConfig) -> dict[str, Any]:
    """Label the requested genomes (reusing results stored under this protocol); returns a run summary."""
    plugins.trust(cfg)  # the user's own config first: a dispatch class or a plug-in module (a gene) named in it
    if cfg.get("action", "label") == "status":
        from forge.labelling.status import status

        return status(cfg)
    if cfg.get("action", "label") != "label":
        raise GenomeError(f"action = {cfg.action!r} is unknown; allowed: label | status")
    from forge.runtime.needs import check_training

    check_training(to_container(cfg.protocol), to_container(cfg.corpus), "forge-label")  # before any work
    if cfg.get("export"):  # an unwritable export path is found now, not after hours of training
        if Path(str(cfg.export)).is_dir():
            raise GenomeError(f"export={cfg.export} is a folder; allowed: a .jsonl file path")
        check_writable(Path(str(cfg.export)), "export")
    logger = logger_node(cfg)  # a logger whose package is missing: refused before any work too
    from forge.labelling.stop_cli import checkpoints_dir, stop_spec, write_stops

    stop = stop_spec(to_container(cfg.get("stop")))  # a bad rule, model or inputs file: refused before any work
    genomes = _genomes(cfg)
    store = LabelStore(cfg.store)
    new: list[Label] = []
    caught: dict[str, str] = {}
    steps = Steps("forge-label", f"labelling under {OmegaConf.select(cfg, 'protocol.name')}", len(genomes),
                  enabled=bool(cfg.get("progress", True)))
    factory = plugins.instantiate("dispatch", cfg.dispatch, _partial_=True, _convert_="all")
    factory = plugins.checked_factory(factory, "dispatch", ("protocol", "corpus", "store", "on_label", "retry", "logger"))
    trainer = factory(protocol=to_container(cfg.protocol), corpus=to_container(cfg.corpus), store=store,
                      on_label=_progress(new, caught, steps), retry=str(cfg.get("retry", "failed")), logger=logger)
    if hasattr(trainer, "stop"):  # rung checkpoints and the stopping rule (forge.labelling.stop_cli)
        trainer.ckpt_dir, trainer.stop = checkpoints_dir(cfg, store.url), stop
    place(trainer, _out_dir(cfg))  # submitit's logs in the labelling output folder, not the current one
    fp = trainer.fingerprint()  # a bad protocol or corpus is refused here, before the store is touched
    len(store)  # then the store: a bad URL or a file that is not a database is refused before any training
    t0 = time.perf_counter()
    with term_as_interrupt(caught), steps:
        try:
            trainer.train(genomes)  # Ctrl-C or SIGTERM: in-flight claims are released as failed (retried next run)
            status = "complete"
        except KeyboardInterrupt:
            status = "interrupted"
    summary = _summary(cfg, genomes, new, store, time.perf_counter() - t0, fp)
    summary["status"] = status
    if status == "interrupted":
        summary["interrupted_by"] = caught.get("signal", "SIGINT")
    if cfg.get("export"):
        summary["exported"] = store.export_jsonl(cfg.export, finite_only=bool(cfg.get("export_finite_only")),
                                                 protocol=fp)
        summary["export_path"] = str(cfg.export)
    out = _out_dir(cfg)
    if out is not None:
        summary["stops_logged"] = write_stops(out / run_folder.STOPS, new)
        atomic_write_json(out / run_folder.LABEL_SUMMARY, summary)
    return summary


def _summary(cfg: DictConfig, genomes: list[Genome], new: list[Label], store: LabelStore, wall: float,
             fp: str) -> dict:
    fin = [lab for lab in new if lab.finite]
    walls = [lab.provenance["wall_s"] for lab in fin if "wall_s" in lab.provenance]
    tps = [lab.provenance["tokens_per_s"] for lab in fin if lab.provenance.get("tokens_per_s")]
    by = {s: [lab for lab in new if lab.status == s] for s in ("diverged", "failed", "stopped")}
    return {"requested": len(genomes), "trained": len(new), "skipped_done": len(genomes) - len(new),
            "finite": len(fin), "inf": len(new) - len(fin), "diverged": len(by["diverged"]),
            "failed": len(by["failed"]), "stopped": len(by["stopped"]),
            "tokens_trained": sum(int(lab.provenance.get("tokens_trained", 0)) for lab in new), "store": where(store), "store_size": len(store),
            "wall_s": round(wall, 2), "median_label_wall_s": statistics.median(walls) if walls else None,
            "median_tokens_per_s": statistics.median(tps) if tps else None,
            "protocol": OmegaConf.select(cfg, "protocol.name"), "protocol_fp": fp, "seed": int(cfg.seed),
            "inf_reasons": sorted({lab.reason for lab in new if not lab.finite})[:20]}


@forge_main("forge-label")
def _hydra_main(cfg: DictConfig) -> None:
    summary = run(cfg)
    print(json.dumps(summary, indent=2) if cfg.get("json") or "requested" not in summary else human(summary))
    if summary.get("status") == "interrupted":  # 130 / 143 as forge-search: the shell's 128 + signal number
        import sys

        print(f"forge-label: stopped by {summary.get('interrupted_by', 'SIGINT')} after {summary.get('trained', 0)} of "
              f"{summary.get('requested', '?')} genomes (kept in {summary.get('store')}); run the same command again "
              "to continue", file=sys.stderr)
        raise SystemExit(EXIT_SIGTERM if summary.get("interrupted_by") == "SIGTERM" else EXIT_SIGINT)



def human(s: dict[str, Any]) -> str:
    """The job's end in a few words (label_summary.json and `--json` hold every field)."""
    med = s.get("median_label_wall_s")
    text = (f"labelled {s['trained']} of {s['requested']} genomes under {s.get('protocol')} in {clock(s['wall_s'])} "
            f"({s['skipped_done']} already in the store): {s['finite']} finite, {s['diverged']} diverged, "
            f"{s['failed']} failed" + (f", {s['stopped']} stopped at a rung" if s.get("stopped") else "") + (f"; median {med:.1f} s per label" if med else "")
            + f"\nstore: {s['store']} ({s['store_size']} labels)")
    if s.get("exported"):
        text += f"\nexported {s['exported']} labels to {s.get('export_path', 'the export file')}"
    return text + ("" if s.get("status") == "complete" else f"\nstatus: {s.get('status')}: run it again to resume")


def main() -> None:
    """`forge-label status ...` is short for `forge-label action=status ...`; `--json` for json=true."""
    import sys

    if len(sys.argv) > 1 and sys.argv[1] == "status":
        sys.argv[1] = "action=status"
    sys.argv = [a for a in sys.argv if a != "--json"] + (["json=true"] if "--json" in sys.argv[1:] else [])
    _hydra_main()  # forge_main: config errors exit 2 with one line, inside and outside Hydra


if __name__ == "__main__":
    main()
