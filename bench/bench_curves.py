"""Issue 52: multi-fidelity labels on iha-tiny under cpu-curve, replayed offline from committed curves.

    # the trainings (real CPU; the curves land in the store, then in the committed JSONL):
    nice -n 10 .venv/bin/forge-label space=iha-tiny protocol=cpu-curve n=84 seed=52 dispatch.workers=2 \
        store=bench/results/curves/cpu-curve.db export=bench/results/curves/iha-tiny-cpu-curve.jsonl logger=none
    # costs on 2 hardware targets + surrogate priors, then every figure (RESULTS "Issue 52"):
    .venv/bin/python bench/bench_curves.py prepare
    .venv/bin/python bench/bench_curves.py analyze      # rank agreement per rung, cost per label, curve models
    .venv/bin/python bench/bench_curves.py replay       # (a)-(d): rule vs no-stop vs ASHA vs MOASHA, 3 seeds

The replay feeds the committed curves, in a random arrival order per seed, through the same rule objects a live
training calls (forge.fidelity.stopping, forge.fidelity.moasha, search.race): a stopped genome costs the
tokens up to its rung, a finished one its full budget; the front grows as labels finish. The curve model of
genome i is fit on the other folds only (5-fold cross-fit), so no decision sees its own final label.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from forge.disk.io import atomic_write_json
from forge.fidelity.stopping import KINDS, AshaRule, Context, FrontRule, NoStop, fit_curve_model

HERE = Path(__file__).resolve().parent / "results" / "curves"
LABELS = HERE / "iha-tiny-cpu-curve.jsonl"
DATA = HERE / "curves.json"
TARGETS = (("roofline", {"hardware": "orin-nano"}, "tpot_ms"), ("eyeriss", {}, "tpot_ms"))
FOLDS = 5


def prepare(labels: Path, out: Path) -> dict:
    """Full curves, exact costs on the targets, the shipped surrogate's prior: one JSON to replay from."""
    from backends.interface import Workload
    from backends.registry import build_backend
    from forge.genomes.labels import read_labels
    from surrogate.loading import load_predictor

    labs = [lab for lab in read_labels(labels) if lab.status == "done" and len(lab.provenance.get("curve", [])) == 4]
    genomes = [lab.genome for lab in labs]
    costs = np.stack([build_backend(n, **kw).evaluate(genomes, Workload()).objective(obj) for n, kw, obj in TARGETS], 1)
    mu, sd = load_predictor("data/surrogate/forgeformer-iha-tiny").predict(genomes, n_mc=20)
    rows = [{"id": lab.genome_id, "curve": [p["val_loss"] for p in lab.provenance["curve"]],
             "tokens": [p["tokens"] for p in lab.provenance["curve"]], "costs": [round(float(c), 6) for c in costs[i]],
             "prior": round(float(mu[i]), 6), "prior_sd": round(float(sd[i]), 6), "cpu_s": lab.provenance.get("cpu_s"),
             "params": lab.provenance.get("params")} for i, lab in enumerate(labs)]
    d = {"targets": [f"{n}:{kw.get('hardware', n)}:{o}" for n, kw, o in TARGETS], "genomes": rows}
    atomic_write_json(out, d)
    return {"genomes": len(rows), "dropped": sum(1 for _ in read_labels(labels)) - len(rows)}


def _load(path: Path):
    d = json.loads(path.read_text())
    g = d["genomes"]
    return ([r["id"] for r in g], np.array([r["curve"] for r in g]), np.array(g[0]["tokens"]),
            np.array([r["costs"] for r in g]), np.array([r["prior"] for r in g]), g)


def analyze(path: Path) -> dict:
    """Rank agreement of each rung with the final label (Spearman, bootstrap 5-95%), cost per label, and each
    curve model's out-of-sample error and 90%-interval coverage per rung (5-fold cross-fit)."""
    ids, L, T, C, prior, rows = _load(path)
    rng = np.random.default_rng(0)
    out = {"n": len(ids), "rung_tokens": T.tolist(), "rungs": []}
    for r in range(L.shape[1]):
        rho = float(spearmanr(L[:, r], L[:, -1])[0])
        boot = [spearmanr(L[b, r], L[b, -1])[0] for b in (rng.integers(0, len(ids), len(ids)) for _ in range(500))]
        out["rungs"].append({"rung": r + 1, "tokens": int(T[r]), "spearman_vs_final": round(rho, 3),
                             "boot_5_95": [round(float(np.nanpercentile(boot, 5)), 3),
                                           round(float(np.nanpercentile(boot, 95)), 3)]})
    out["spearman_prior_vs_final"] = round(float(spearmanr(prior, L[:, -1])[0]), 3)
    cpu = [r["cpu_s"] for r in rows if r.get("cpu_s")]
    out["cpu_s_per_label"] = {"median": round(float(np.median(cpu)), 2), "p90": round(float(np.percentile(cpu, 90)), 2)}
    out["models"] = {}
    for kind in KINDS:
        pred = _crossfit(L, prior, kind)
        err = np.abs(pred[:, :, 0] - L[:, -1:])
        res = [{"rung": r + 1, "mae": round(float(np.nanmean(err[:, r])), 4),
                "coverage_90": round(float(np.nanmean(err[:, r] <= 1.645 * pred[:, r, 1])), 3),
                "sd": round(float(np.nanmean(pred[:, r, 1])), 4),
                "not_covered": int(np.isnan(err[:, r]).sum())} for r in range(L.shape[1] - 1)]
        out["models"][kind] = res
    model = fit_curve_model(L, "prior", prior)
    atomic_write_json(HERE / "cpu-curve-model.json", model.to_dict())
    atomic_write_json(HERE / "analyze.json", out)
    return out


def _folds(n: int) -> np.ndarray:
    return np.random.default_rng(52).permutation(n) % FOLDS


def _crossfit(L: np.ndarray, prior: np.ndarray, kind: str) -> np.ndarray:
    """[genome, rung, (mean, sd)] predicted by a model fit without the genome's fold."""
    f, out = _folds(len(L)), np.zeros((len(L), L.shape[1] - 1, 2))
    for k in range(FOLDS):
        m = fit_curve_model(L[f != k], kind, prior[f != k] if "prior" in kind else None)
        for i in np.flatnonzero(f == k):
            for r in range(L.shape[1] - 1):  # outside the model's span the rule makes no projection: NaN
                out[i, r] = m.predict(r, L[i], prior[i] if "prior" in kind else None) if m.covers(r, L[i]) else np.nan
    return out


def _hv(F: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    from pymoo.indicators.hv import HV

    if not len(F):
        return 0.0
    return float(HV(ref_point=np.full(F.shape[1], 1.1))((F - lo) / (hi - lo)))


def replay_one(order, L, T, C, prior, ids, rule_of) -> dict:
    """One arrival order through a rule: tokens spent, the HV trace, what stopped where."""
    F = np.column_stack([L[:, -1], C])
    lo, hi = F.min(0), F.max(0)
    peers, tokens, done, trace, stops = {}, 0, [], [], {}
    for i in order:
        ctx = Context(list(C[i]), float(prior[i]), [], peers, ids[i])
        rule = rule_of(i)
        for r in range(L.shape[1] - 1):
            v = rule.decide(r, L[i, : r + 1], ctx)
            if v is not None:
                tokens += int(T[r])
                peers[ids[i]] = (list(C[i]), list(L[i, : r + 1]), None)
                stops[ids[i]] = {"rung": r + 1, **{k: v[k] for k in ("interval", "dominated_by") if k in v}}
                break
        else:
            tokens += int(T[-1])
            peers[ids[i]] = (list(C[i]), list(L[i]), float(L[i, -1]))
            done.append(i)
        trace.append((tokens, _hv(F[done], lo, hi)))
    return {"tokens": tokens, "hv": trace[-1][1], "trace": trace, "stops": stops, "done": [ids[i] for i in done]}


def _front_ids(L, C, ids) -> set:
    from search.archive import non_dominated

    return {ids[i] for i in non_dominated(np.column_stack([L[:, -1], C]))}


def _models(L, prior, kind):
    f = _folds(len(L))
    fits = {k: fit_curve_model(L[f != k], kind, prior[f != k] if "prior" in kind else None) for k in range(FOLDS)}
    return lambda i: fits[int(f[i])]


def replay(path: Path, seeds: list[int], thresholds: list[float], kinds: list[str]) -> dict:
    ids, L, T, C, prior, _ = _load(path)
    full_front, n = _front_ids(L, C, ids), len(ids)
    rules = {"none": lambda i: NoStop()}
    for eta in (2, 3, 4):
        rules[f"asha-eta{eta}"] = (lambda e: lambda i: AshaRule(e))(eta)
    for kind in kinds:
        fits = _models(L, prior, kind)
        for t in thresholds:
            rules[f"front-{kind}-p{t:g}"] = (lambda t_, fits_: lambda i: FrontRule(fits_(i), t_))(t, fits)
    try:
        from forge.fidelity.moasha import MoashaRule

        MoashaRule(3, 4, tuple(int(x) // 1024 for x in T)).decide(0, [3.0], Context([1.0], None, [], {}, "x"))
        for eta in (2, 3):
            rules[f"moasha-eta{eta}"] = (lambda e: lambda i: MoashaRule(e, 4, tuple(int(x) // 1024 for x in T)))(eta)
    except Exception as e:  # noqa: BLE001 - the extra is optional: say so in the results
        print(f"moasha skipped: {e}")
    out = {"n": n, "front_size": len(full_front), "seeds": seeds, "rules": {}}
    for name, rule_of in rules.items():
        per = []
        for s in seeds:
            order = np.random.default_rng(s).permutation(n)
            base = replay_one(order, L, T, C, prior, ids, lambda i: NoStop())
            got = replay_one(order, L, T, C, prior, ids, rule_of)
            # tokens each spent until it first held the rule's final front (HV): the no-stop order vs the rule
            reach = next(t for t, h in base["trace"] if h >= got["hv"] - 1e-12)
            got_reach = next(t for t, h in got["trace"] if h >= got["hv"] - 1e-12)
            wrong = sorted(set(got["stops"]) & full_front)
            per.append({"seed": s, "tokens": got["tokens"], "tokens_nostop": base["tokens"], "hv": got["hv"],
                        "hv_full": base["hv"], "ratio_same_hv": reach / got_reach,
                        "compute_ratio": base["tokens"] / got["tokens"], "stopped": len(got["stops"]),
                        "wrong_stops": len(wrong), "wrong_per_100": 100 * len(wrong) / n, "wrong_ids": wrong,
                        "stops": got["stops"]})
        out["rules"][name] = {"per_seed": per, **{k: round(float(np.mean([p[k] for p in per])), 4) for k in
                              ("ratio_same_hv", "compute_ratio", "wrong_per_100", "stopped", "hv")},
                              "hv_full": round(per[0]["hv_full"], 4)}
        r = out["rules"][name]
        print(f"{name:28s} compute x{r['compute_ratio']:.2f}  same-HV x{r['ratio_same_hv']:.2f}  "
              f"HV {r['hv']:.4f}/{r['hv_full']:.4f}  stopped {r['stopped']:.1f}  wrong/100 {r['wrong_per_100']:.2f}")
    out["race"] = race_replay(L, C, prior, ids, T, seeds, kinds, thresholds)
    atomic_write_json(HERE / "replay.json", out)
    return out


def race_replay(L, C, prior, ids, T, seeds, kinds, thresholds, k: int = 8, draws: int = 100) -> dict:
    """(d) verify racing: k random picks per draw; regret of the raced front vs all k trained in full."""
    from forge.fidelity.race import race_plan

    res = {}
    for kind in kinds:
        fits = _models(L, prior, kind)
        for t in thresholds:
            reg, saved, best_reg = [], [], []
            for s in seeds:
                rng = np.random.default_rng(1000 + s)
                for _ in range(draws):
                    pick = rng.choice(len(ids), k, replace=False)
                    plan = race_plan({ids[i]: L[i] for i in pick}, {ids[i]: C[i] for i in pick},
                                     {ids[i]: prior[i] for i in pick}, _race_model(L, prior, kind, pick), t)
                    fin = [ids.index(g) for g in plan["finished"]]
                    F = np.column_stack([L[pick, -1], C[pick]])
                    lo, hi = F.min(0), F.max(0) + 1e-12
                    hv_all, hv_race = _hv(F, lo, hi), _hv(np.column_stack([L[fin, -1], C[fin]]), lo, hi)
                    reg.append((hv_all - hv_race) / hv_all if hv_all > 0 else 0.0)
                    best_reg.append(float(L[fin, -1].min() - L[pick, -1].min()))
                    spent = sum(int(T[-1]) if g in plan["finished"] else int(T[plan["stopped"][g]["rung"] - 1])
                                for g in (ids[i] for i in pick))
                    saved.append(k * int(T[-1]) / spent)
            res[f"{kind}-p{t:g}"] = {"hv_regret_mean": round(float(np.mean(reg)), 5),
                                     "hv_regret_p95": round(float(np.percentile(reg, 95)), 5),
                                     "draws_with_regret": round(float(np.mean(np.array(reg) > 1e-9)), 3),
                                     "best_loss_regret_mean": round(float(np.mean(best_reg)), 5),
                                     "compute_saved_x": round(float(np.mean(saved)), 3), "k": k,
                                     "draws": draws * len(seeds)}
            print(f"race {kind}-p{t:g}: saved x{res[f'{kind}-p{t:g}']['compute_saved_x']:.2f} "
                  f"HV regret {res[f'{kind}-p{t:g}']['hv_regret_mean']:.4f}")
    return res


def _race_model(L, prior, kind, pick):
    """A curve model fit on every genome but the k picks (the race never sees its own finals)."""
    keep = np.ones(len(L), bool)
    keep[pick] = False
    return fit_curve_model(L[keep], kind, prior[keep] if "prior" in kind else None)


def promote_check(labels: Path, n: int, out: Path) -> dict:
    """A stopped-then-promoted cpu-curve training against the same genome's uninterrupted label in the store:
    stopped at rung 2 (Lightning checkpoint), promoted to the end, the final label compared byte for byte."""
    import tempfile

    from forge.genomes.labels import read_labels
    from forge.labelling.corpus import build_corpus
    from forge.labelling.train import Protocol, train_genome
    import yaml

    from forge.runtime.config import conf_dir

    proto = Protocol.from_config(yaml.safe_load((conf_dir() / "protocol" / "cpu-curve.yaml").read_text()))
    corpus = build_corpus(yaml.safe_load((conf_dir() / "corpus" / "stdlib.yaml").read_text()))  # forge-label's default
    rows = []
    for lab in [x for x in read_labels(labels) if x.status == "done"][:n]:
        with tempfile.TemporaryDirectory() as d:
            part = train_genome(lab.genome, proto, corpus, ckpt_dir=d, fp=lab.protocol_fp,
                                decide=lambda r, c: {"rule": "bench", "reason": "stop at rung 2"} if r == 1 else None)
            done = train_genome(lab.genome, proto, corpus, ckpt_dir=d, fp=lab.protocol_fp)
        rows.append({"id": lab.genome_id, "uninterrupted": lab.label, "promoted": done.label,
                     "equal_bytes": done.label.hex() == lab.label.hex(), "stopped_at_step": part.provenance["stopped"]["step"],
                     "resumed_from_step": done.provenance.get("resumed_from_step")})
        print(rows[-1])
    atomic_write_json(out, {"rows": rows})
    return {"equal": sum(r["equal_bytes"] for r in rows), "of": len(rows)}


def report() -> str:
    """The RESULTS tables from analyze.json and replay.json (markdown)."""
    a, r = json.loads((HERE / "analyze.json").read_text()), json.loads((HERE / "replay.json").read_text())
    out = ["| rung | tokens | Spearman vs final | bootstrap 5-95% |", "|---|---|---|---|"]
    out += [f"| {x['rung']} | {x['tokens']:,} | {x['spearman_vs_final']:.3f} | {x['boot_5_95'][0]:.2f}-"
            f"{x['boot_5_95'][1]:.2f} |" for x in a["rungs"]]
    out += ["", "| curve model | rung | MAE (nats) | 90% coverage | mean sd | not covered |", "|---|---|---|---|---|---|"]
    out += [f"| {k} | {x['rung']} | {x['mae']:.4f} | {x['coverage_90']:.2f} | {x['sd']:.4f} | {x['not_covered']} |"
            for k, rows in a["models"].items() for x in rows]
    out += ["", "| rule | compute saved | same-HV ratio | HV / full | stopped (of n) | wrong stops /100 |",
            "|---|---|---|---|---|---|"]
    out += [f"| {k} | {v['compute_ratio']:.2f}x | {v['ratio_same_hv']:.2f}x | {v['hv'] / v['hv_full']:.4f} | "
            f"{v['stopped']:.1f} | {v['wrong_per_100']:.2f} |" for k, v in r["rules"].items()]
    out += ["", "| race (k = 8) | compute saved | HV regret mean | p95 | draws with regret | best-loss regret |",
            "|---|---|---|---|---|---|"]
    out += [f"| {k} | {v['compute_saved_x']:.2f}x | {v['hv_regret_mean']:.4f} | {v['hv_regret_p95']:.4f} | "
            f"{v['draws_with_regret']:.2f} | {v['best_loss_regret_mean']:.4f} |" for k, v in r["race"].items()]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("prepare", "analyze", "replay", "promote", "report"))
    ap.add_argument("--n", type=int, default=2, help="promote: how many stored genomes to stop and promote")
    ap.add_argument("--labels", type=Path, default=LABELS)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2])
    ap.add_argument("--kinds", nargs="+", default=["last", "prior"])
    a = ap.parse_args()
    if a.what == "prepare":
        print(json.dumps(prepare(a.labels, a.data)))
    elif a.what == "report":
        print(report())
    elif a.what == "promote":
        print(json.dumps(promote_check(a.labels, a.n, HERE / "promote.json")))
    elif a.what == "analyze":
        print(json.dumps(analyze(a.data), indent=1))
    else:
        r = replay(a.data, a.seeds, a.thresholds, a.kinds)
        print(json.dumps({k: {x: v[x] for x in v if x != "per_seed"} for k, v in r["rules"].items()}, indent=1)[:4000])


if __name__ == "__main__":
    main()
