"""Kill campaign of forge-label: SIGKILL real labellers (alone and two sharing a store) at random times,
finish the store with one more run, compare with an uninterrupted run.

    nice python bench/bench_kill_label.py --kills 20 --seed 0 --out bench/results/kill_label.json
    nice python bench/bench_kill_label.py --baseline 0c49453   # two labellers, one store: before vs now

A fast protocol (cpu-proxy with protocol.tokens=2048: 2 steps, a label in about a second) keeps it to
minutes. One uninterrupted reference run labels the genomes first (its own store). Each trial then
starts from an empty store: 1-3 rounds, each starting one labeller (or, with probability --concurrent,
two on the same store) and SIGKILLing each (the labeller process alone, not its group: its workers
must die with it) at a uniformly random time within the reference's wall time or, with probability
--training, at a uniform time within the training phase counted from its first worker (start-up,
mostly imports, is most of a short run); then one last run completes the store. Every kill is counted in its trial's outcome:
- identical: the final store holds exactly the reference labels (bitwise), every one `done`; no
  worker outlived its labeller; no genome finished training twice (parsed from every labeller's log);
- refused: a labeller exited 2 with one line, and the store still ended identical;
- lost: anything else (a different or missing label, an orphan worker, a double training, a traceback).
Seeded: --seed picks the kill times, their phase and the concurrent rounds. Figures go to bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ARGS = ["space=iha-tiny", "seed=0", "protocol.tokens=2048", "protocol.val_tokens=1024", "corpus.max_bytes=2000000",
        "dispatch.workers=2", "dispatch.lease_s=4"]
from tests.forge.labelling._proc_helpers import alive, children  # noqa: E402  (after the sys.path line)

DONE_LINE = re.compile(r"^\[\d+\] ([0-9a-f]{16}) label=")


def start(store: Path, n: int, log: Path) -> subprocess.Popen:
    args = [sys.executable, "-m", "forge.labelling.cli", f"n={n}", f"store={store}",
            f"hydra.run.dir={log.with_suffix('')}", *ARGS]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("w"),
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def store_labels(store: Path) -> dict[str, tuple[str, float | None]]:
    con = sqlite3.connect(store)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = con.execute("SELECT genome_id, status, label FROM forge_labels_v2").fetchall()
    con.close()
    return {g: (s, v) for g, s, v in rows}


def attempts(store: Path) -> int:
    """Claims taken in all (a genome whose claimer was killed mid-training is claimed again)."""
    if not store.exists():
        return 0
    con = sqlite3.connect(store)
    n = con.execute("SELECT coalesce(sum(attempts), 0) FROM forge_labels_v2").fetchone()[0]
    con.close()
    return int(n)


def _kill(p: subprocess.Popen) -> tuple[bool, int]:
    """SIGKILL the labeller alone; (had training workers, how many outlived it by 3 s)."""
    kids = children(p.pid)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(alive(k) for k in kids):
        time.sleep(0.05)
    left = [k for k in kids if alive(k)]
    for k in left:  # never leave one running, even if the check failed
        os.kill(k, signal.SIGKILL)
    return bool(kids), len(left)


def kill_round(store: Path, n: int, timing: dict, rng: random.Random, logs: list[Path], concurrent: bool) -> dict:
    """Start one or two labellers and SIGKILL each: at a uniform time within the reference's wall time, or
    (probability timing["training_p"]) at a uniform time within its training phase, counted from its first worker."""
    k0, procs, plan = len(logs), [], []
    for _ in range(2 if concurrent else 1):
        logs.append(store.parent / f"labeller{len(logs)}.log")
        procs.append(start(store, n, logs[-1]))
        if timing["training_p"] > 0 and rng.random() < timing["training_p"]:  # 0: the uniform-only campaign
            plan.append(["training", rng.uniform(0.0, timing["wall"] - timing["startup"]), None])
        else:
            plan.append(["any", 0.0, time.monotonic() + rng.uniform(0.5, timing["wall"])])
    kills, in_flight, orphans, rcs, todo = 0, 0, 0, [], set(range(len(procs)))
    while todo:
        time.sleep(0.05)
        for i in sorted(todo):
            p, (mode, delay, at) = procs[i], plan[i]
            if p.poll() is not None:
                rcs.append(p.returncode)
                todo.discard(i)
            elif at is None:
                if children(p.pid):
                    plan[i][2] = time.monotonic() + delay
            elif time.monotonic() >= at:
                had, left = _kill(p)
                kills, in_flight, orphans = kills + 1, in_flight + had, orphans + left
                todo.discard(i)
    return {"kills": kills, "in_flight": in_flight, "orphans": orphans, "finished_rcs": rcs,
            "logs": [str(x) for x in logs[k0:]]}


def trial(work: Path, n: int, timing: dict, ref: dict, rng: random.Random, concurrent_p: float) -> dict:
    store, logs, rounds = work / "label.db", [], []
    for _ in range(rng.choice([1, 2, 3])):
        rounds.append(kill_round(store, n, timing, rng, logs, rng.random() < concurrent_p))
    logs.append(work / "final.log")
    final = start(store, n, logs[-1])
    final.wait(timeout=900)
    got = store_labels(store) if store.exists() else {}
    done = Counter(m.group(1) for log in logs if log.exists() for line in log.read_text().splitlines()
                   if (m := DONE_LINE.match(line)))
    tracebacks = sum("Traceback" in log.read_text() for log in logs if log.exists())
    rcs = [rc for r in rounds for rc in r["finished_rcs"]] + [final.returncode]
    same = got == {g: ("done", v) for g, v in ref.items()}
    ok = same and not any(r["orphans"] for r in rounds) and max(done.values(), default=1) == 1 and not tracebacks
    refused = [rc for rc in rcs if rc == 2]
    outcome = "lost" if not ok or any(rc not in (0, 2) for rc in rcs) else ("refused" if refused else "identical")
    return {"outcome": outcome, "kills": sum(r["kills"] for r in rounds), "rounds": len(rounds),
            "kills_in_flight": sum(r["in_flight"] for r in rounds), "attempts": attempts(store),
            "concurrent_rounds": sum(len(r["logs"]) == 2 for r in rounds),
            "orphans": sum(r["orphans"] for r in rounds), "double_trained": sum(c > 1 for c in done.values()),
            "trainings_finished": sum(done.values()), "final_rc": final.returncode, "identical_labels": same,
            "tracebacks": tracebacks}


def two_labellers(tree: Path, out: Path, n: int) -> dict:
    """Two labellers started together on one fresh store (same genomes): trainings finished vs labels stored."""
    out.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    common = [a for a in ARGS if not a.startswith("dispatch.lease_s")]  # an option the old tree does not have
    args = [sys.executable, "-m", "forge.labelling.cli", f"n={n}", f"store={out / 's.db'}", *common]
    procs = [subprocess.Popen(args + [f"hydra.run.dir={out / f'h{i}'}"], cwd=tree, env=env, stdout=subprocess.DEVNULL,
                              stderr=(out / f"err{i}.log").open("w")) for i in (0, 1)]
    rcs = [p.wait(timeout=900) for p in procs]
    trained = sum(bool(re.match(r"^\[\d+(/\d+)?\] [0-9a-f]{16} label=", line))
                  for i in (0, 1) for line in (out / f"err{i}.log").read_text().splitlines())
    con = sqlite3.connect(out / "s.db")
    table = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'forge_labels%'")]
    stored = con.execute(f"SELECT count(*) FROM {table[-1]}").fetchone()[0]
    con.close()
    return {"rcs": rcs, "trainings_finished": trained, "labels_stored": stored}


def baseline(rev: str, n: int) -> dict:
    """The two-labeller case on the tree at `rev` (git archive; its conf/ as forge_conf) and on this tree."""
    with tempfile.TemporaryDirectory(prefix="label_baseline_") as tmp:
        old = Path(tmp) / "tree"
        old.mkdir()
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        (old / "forge_conf").symlink_to(old / "conf")  # `pkg://forge_conf` must find that tree's configs
        return {"rev": rev, "before": two_labellers(old, Path(tmp) / "before", n),
                "after": two_labellers(ROOT, Path(tmp) / "after", n)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=20, help="stop once this many SIGKILLs landed")
    ap.add_argument("--n", type=int, default=6, help="genomes per store")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concurrent", type=float, default=0.4, help="probability a round runs two labellers")
    ap.add_argument("--training", type=float, default=0.5,
                    help="probability a kill is aimed at the training phase (after the labeller's first worker)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--baseline", default=None, metavar="REV",
                    help="only compare two concurrent labellers on the tree at REV (e.g. 0c49453) and on this one")
    a = ap.parse_args()
    if a.baseline:
        print(json.dumps(baseline(a.baseline, a.n), indent=2))
        return
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory(prefix="kill_label_") as tmp:
        ref_store = Path(tmp) / "ref" / "label.db"
        ref_store.parent.mkdir()
        t0, startup = time.monotonic(), None
        p = start(ref_store, a.n, ref_store.parent / "ref.log")
        while p.poll() is None:
            time.sleep(0.05)
            if startup is None and children(p.pid):
                startup = time.monotonic() - t0  # imports, corpus, fingerprint: before the first worker
        assert p.returncode == 0, (ref_store.parent / "ref.log").read_text()[-2000:]
        timing = {"wall": time.monotonic() - t0, "startup": startup or 0.0, "training_p": a.training}
        ref = {g: v for g, (s, v) in store_labels(ref_store).items()}
        trials = []
        while sum(t["kills"] for t in trials) < a.kills:
            work = Path(tmp) / f"t{len(trials)}"
            work.mkdir()
            trials.append(trial(work, a.n, timing, ref, rng, a.concurrent))
            print(json.dumps(trials[-1]), flush=True)
    by = Counter()
    for t in trials:
        by[t["outcome"]] += t["kills"]
    summary = {"command": " ".join(sys.argv), "reference_wall_s": round(timing["wall"], 1),
               "reference_startup_s": round(timing["startup"], 1), "genomes": a.n, "args": ARGS,
               "trials": len(trials), "kills": sum(t["kills"] for t in trials),
               "kills_by_outcome": {k: by.get(k, 0) for k in ("identical", "refused", "lost")},
               "concurrent_rounds": sum(t["concurrent_rounds"] for t in trials),
               "kills_in_flight": sum(t["kills_in_flight"] for t in trials),
               "claims": sum(t["attempts"] for t in trials),
               "orphan_workers": sum(t["orphans"] for t in trials),
               "double_trained": sum(t["double_trained"] for t in trials),
               "trainings_finished": sum(t["trainings_finished"] for t in trials),
               "labels_needed": a.n * len(trials), "per_trial": trials}
    print(json.dumps({k: v for k, v in summary.items() if k != "per_trial"}, indent=2))
    if a.out:
        from forge.disk.io import atomic_write_json

        atomic_write_json(a.out, summary)


if __name__ == "__main__":
    main()
