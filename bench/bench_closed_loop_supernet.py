"""Issue 38 §2: the closed loop guided by the supernet, against today's co-evolution, every label counted.

    nice -n 10 .venv/bin/python bench/bench_closed_loop_supernet.py --seeds 0 1 2 3 4   # then --table-only
    ... --rescore OUT RES1 WORK1 RES2 WORK2 ...   # arms run in parallel processes: one TPOT per genome

bench_closed_loop_acquire.py's loop (iha-tiny, cpu-proxy labels, NSGA-II pop 40 on the host-cpu roofline TPOT,
8 co-evolution labels every 2 generations, verify picks topped up to N new labels, the 340 shipped cpu-proxy
priors pre-seeded), in two arms:
  paper     today's co-evolution of the shipped tiny Forge-Former (re-run here, same invocation)
  supernet  the search's loss is the supernet score of outputs/supernet/supernet-tiny (trained for 11.3 labels'
            CPU, bench_supernet.py train; scored on 4096 validation tokens) through its score→label line, fitted on
            the 340 priors; co-evolution picks labels the same way and refits the line on priors + the labels so
            far (the supernet weights are not retrained)
Label-equivalents: paper = 340 + N; supernet = 340 + N + 11.3 (the supernet's training CPU in labels).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench_closed_loop import CO_BATCH, CO_EVERY, ROOT
from bench_closed_loop_acquire import ARMS, PRIORS, Acquire, main, table

SUPERNET = ROOT / "outputs" / "supernet" / "supernet-tiny"
VAL_TOKENS = 4096  # scoring windows: bench_supernet.py score's 0.166 CPU s per genome (16384 is 4x that)
TRAIN_LABELS = 11.3  # the supernet's training CPU in labels' CPU (bench/RESULTS.md, issue 38)


def prior_labels() -> list[Any]:
    from forge.runtime.config import data_dir
    from forge.genomes.labels import Label

    rows = [Label.from_json(x) for x in (data_dir() / PRIORS).read_text().splitlines() if x.strip()]
    return [lab for lab in rows if lab.finite]


class LineRefit:
    """Co-evolution's `finetune` for the supernet: refit the score→label line on the priors + the labels so far.
    Every returned predictor shares the supernet and its score cache, so no genome is scored twice."""

    def __init__(self, priors: list[Any]):
        self.priors = priors

    def __call__(self, base: Any, buffer: list[Any], replay: Any, seed: int = 0, **_: Any) -> Any:
        rows = self.priors + list(buffer)
        return replace(base).fit_line([lab.genome for lab in rows], np.array([lab.label for lab in rows]))


class Supernet(Acquire):
    arms = {"paper": ARMS["paper"], "supernet": ({}, {})}

    def __init__(self, work: Path, n: int):
        super().__init__(work, n)
        self.priors, self.base = prior_labels(), None

    def parts(self, counted: Any, seed: int, co_kw: dict[str, Any]) -> dict[str, Any]:
        if self._arm != "supernet":
            return super().parts(counted, seed, co_kw)
        from search.coevolution import CoEvolution
        from surrogate.supernet import load_supernet

        if self.base is None:  # loaded and fitted once; the score cache then serves every seed
            net = load_supernet(SUPERNET)
            net.protocol = {**net.protocol, "val_tokens": VAL_TOKENS}
            self.base = LineRefit(self.priors)(net, [], None)
        co = CoEvolution(CO_EVERY, counted, LineRefit(self.priors), self.base, [], batch=CO_BATCH, n_mc=0,
                         seed=seed, load=load_supernet, **co_kw)
        return {"coevolution": co, "predictor": replace(self.base)}

    def arm(self, name: str, seed: int, hv: Any) -> dict[str, Any]:
        self._arm = name
        out = super().arm(name, seed, hv)
        n = len(self.priors) + self.nmax + (TRAIN_LABELS if name == "supernet" else 0.0)
        pt = out["points"][str(self.nmax)]
        return out | {"label_equiv": n, "hv_per_kle": round(1000 * pt["hv"] / n, 4),
                      "line": list(self.base.line) if name == "supernet" and self.base else None}


def rescore(pairs: list[tuple[Path, Path]], out: Path) -> None:
    """Score every (result JSON, work folder) pair's runs again with one TPOT per genome (the union of their
    measured caches, the first pair's value winning), so arms run in parallel processes share their TPOTs."""
    import json

    from bench_closed_loop import Counted
    from forge.genomes.genome import genome_from_dict
    from search.archive import Hypervolume
    from search.state import read_jsonl

    union: dict[str, float] = {}
    for _, work in reversed(pairs):
        union.update(json.loads((work / "measured.json").read_text()))
    merged: dict[str, Any] = {"runs": {}}
    for res_path, work in pairs:
        res, b = json.loads(res_path.read_text()), Supernet(work, 24)
        b.tpot, hv = union, Hypervolume(res["anchor"], 2.0)
        merged.update(n=res["n"], anchor=res["anchor"])
        for key, r in res["runs"].items():
            run_dir, counted = work / "runs" / key.replace("/", "-"), Counted(b.trainer)
            co_ids = [i for e in read_jsonl(run_dir / "coevolution.jsonl") for i in e["picked"]]
            picks = b._picks(run_dir, set(co_ids), ["val_loss", "tpot_ms"], res["n"] - len(co_ids))
            gs = {r2["id"]: genome_from_dict(r2["genome"]) for r2 in read_jsonl(run_dir / "archive.jsonl")}
            ids = list(dict.fromkeys(co_ids + [p["id"] for p in picks]))
            counted.train([gs[i] for i in ids])
            curve = [b.score(counted.labels, ids[:m], hv) for m in range(CO_BATCH, len(ids) + 1, CO_BATCH)]
            merged["runs"][key] = r | {"curve": curve, "points": {str(res["n"]): b.score(counted.labels, ids, hv)},
                                       "in_priors": len(set(ids) & {lab.genome_id for lab in b.priors})}
    out.write_text(json.dumps(merged, indent=1))
    print(table(merged, Supernet.arms), le_table(merged), sep="\n\n")


def le_table(res: dict[str, Any]) -> str:
    """Every label counted: priors + new labels (+ the supernet's training) and the real HV per 1,000 of them."""
    from bench_closed_loop import _ms

    n, lines = str(res["n"]), ["| arm | seeds | label-equivalents (priors + new + supernet training) | real HV | "
                               "real HV per 1,000 label-eq. | best real loss | new labels already among the priors |",
                               "|---|---|---|---|---|---|---|"]
    for arm in Supernet.arms:
        runs = [r for k, r in res["runs"].items() if k.split("/")[0] == arm]
        if runs:
            le = 340 + res["n"] + (TRAIN_LABELS if arm == "supernet" else 0.0)
            hv = [r["points"][n]["hv"] for r in runs]
            lines.append(f"| {arm} | {len(runs)} | {le:g} | {_ms(hv)} | {_ms([1000 * h / le for h in hv])} | "
                         f"{_ms([r['points'][n]['best_loss'] for r in runs])} | "
                         f"{_ms([r.get('in_priors', float('nan')) for r in runs])} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--rescore"]:  # --rescore OUT RES1 WORK1 [RES2 WORK2 ...]
        a = [Path(x) for x in sys.argv[2:]]
        rescore(list(zip(a[1::2], a[2::2])), a[0])
    else:
        main(Supernet, "closed_loop_supernet", __doc__)
