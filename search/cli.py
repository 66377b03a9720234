"""CLI apps of the search: `forge-search`, `forge-report`, `forge-export` (thin Hydra mains around run()).

    forge-search                                   # Table 6 defaults on iha-paper + roofline (~1 min CPU)
    forge-search -m seed=0,1,2,3,4 search=nsga,random
    forge-search resume=outputs/search/<stamp>     # continue a killed or interrupted run
    forge-report runs='[multirun/search/<stamp>]'  # PNGs + one self-contained report.html
    forge-export run=<dir> select=knee format=safetensors out=exported/
"""
from __future__ import annotations

import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from forge import plugins
from forge.shell import plugin_use
from forge.shell.app import EXIT_SIGINT, EXIT_SIGTERM, forge_main
from forge.runtime.config import output_dir, select, to_container
from forge.disk.confined import refuse_links
from forge.disk.lock import run_lock
from forge.disk.io import atomic_write_text, check_writable, sweep_temporaries
from forge.runtime.launch_only import check_saved
from search.build import build_search
from search.errors import SearchConfigError
from search.ledger import has_checkpoint, resume_state
from search.python_objects import check_resumable_here
from search.run_files import check_run_files, refuse_unknown_keys
from search.state import (CONFIG, RUNTIME_KEYS, ResumeError, check_resumable, check_same_config,
                          holds_search, saved_config)
from search.user_surrogate import own_units
from forge.disk import run_folder


def run(cfg: Any, components: dict[str, Any] | None = None, given: list[str] | None = None) -> dict[str, Any]:
    """Run (or resume) one search; `components` may inject the parts `search.build.PARTS` names (space, evaluator,
    backend, workload, coevolution, or a surrogate object as `predictor`, fitted on evaluator.labels when it
    arrives unfitted). `given`: the keys a resume compares (the API's arguments; default: the command line's)."""
    c = to_container(cfg)
    resume = c.get("resume")
    run_dir = Path(resume) if resume else output_dir(c, fallback="outputs/search")
    plugins.trust(c)  # the live config only: what resume reads back from the run folder is data
    c = own_units(c, (components or {}).get("predictor"))  # the default loss limit only in the shipped units
    if not resume:
        check_writable(run_dir)
    with run_lock(run_dir) if not resume or run_dir.is_dir() else nullcontext():  # one writer per run folder
        return _run_locked(c, run_dir, components, given)


def _run_locked(c: dict[str, Any], run_dir: Path, components: dict[str, Any] | None,
                given: list[str] | None) -> dict[str, Any]:
    resume = c.get("resume")
    if resume:
        refuse_links(run_dir)  # a link planted in the run folder would send its appends outside it
        c = resumed_config(c, run_dir, components or {}, given)
    elif holds_search(run_dir):  # asked again under the lock: a search that ended meanwhile is not overwritten
        raise SearchConfigError(f"{run_dir} already holds a search; allowed: resume={run_dir} or a new out_dir")
    _set_threads(c.get("threads"))
    job = build_search(c, run_dir, components)  # settles the config: a bad range is refused here, nothing written
    if resume:
        job.load()  # refuses before it rewrites any file
        sweep_temporaries(run_dir, run_dir / run_folder.STATE_DIR)  # what a killed write left, once the resume is accepted
    else:
        job.hypervolumes()  # the anchor, the parts' first use: a user's backend that fails fails before any write
    if not (run_dir / CONFIG).is_file():  # once the config has built a search (bad input writes nothing)
        import yaml

        atomic_write_text(run_dir / CONFIG, yaml.safe_dump({**c, "resume": None}, sort_keys=False))
        plugin_use.record(run_dir, space_genes(job.space))  # the plug-ins it uses (never imported from here)
    summary = job.run(c.get("stop_after"))
    if summary["status"] != "complete":
        from search.suggest import resume_command

        print(f"search {summary['status']} after generation {summary['generations_done']} of {summary['generations']} "
              f"(summary.json status: {summary['status']}); continue with: {resume_command(run_dir, c)}",
              file=sys.stderr)
    return summary


def space_genes(space: Any) -> set[str]:
    """The registered genes a space names beyond the built-in grids (a plug-in's, recorded when the run uses it)."""
    return {*(space.genes or {}), *(space.global_genes or {})}


def resumed_config(c: dict[str, Any], run_dir: Path, parts: dict[str, Any] | None = None,
                   given: list[str] | None = None) -> dict[str, Any]:
    """The run's own config plus this command's runtime keys, refused (nothing changed) before anything is built:
    also when the run was made from Python with objects no command rebuilds and this call does not hand them."""
    check_run_files(run_dir)  # every run file read and checked now, none late (config.yaml for the end screen)
    if has_checkpoint(run_dir):
        saved = dict(resume_state(run_dir)["config"])  # a log cut behind it, a torn one: rebuilt or refused
    else:
        check_resumable(run_dir)
        saved = saved_config(run_dir)
        refuse_unknown_keys(saved, run_dir)  # a checkpoint's config is checked by its own reader
    given = given if given is not None else _cli_overrides()
    # no shell line from disk; the dispatch keys this command gives again replace the run's (never used, so
    # never refused: a Ray run saved with one address continues under another)
    check_saved(placed(saved, c, given), c, f"resume={run_dir}", f"forge-search resume={run_dir}")
    check_resumable_here(saved, parts or {}, run_dir)  # a Python object: continued from Python, or refused
    plugin_use.require(run_dir, code=True)  # the modules it was made with, imported again only by the live config
    return resume_config(c, saved, run_dir, given)


def _cli_overrides() -> list[str] | None:
    """The command-line overrides of this Hydra job (None outside Hydra)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except ValueError:
        return None


def resume_config(c: dict[str, Any], saved: dict[str, Any], run_dir: Path,
                  overrides: list[str] | None) -> dict[str, Any]:
    """The config to continue with: the run's own, plus the new runtime keys.

    From the command line only the keys given again are compared (`forge-search resume=DIR` alone works);
    called with a whole config (tests, scripts) every key is compared. A difference is refused, listed.
    """
    if overrides is None:
        check_same_config(saved, c, run_dir)
        return {**saved, **{k: c[k] for k in RUNTIME_KEYS if k in c}}
    keys = _given_keys(overrides)
    diff = [k for k in keys if k.split(".")[0] not in PLACEMENT_KEYS
            and select(saved, k, "<unset>") != select(c, k, "<unset>")]
    if diff:
        kept = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in (*diff, "resume")]
        from search.suggest import resume_command

        raise ResumeError(f"resume={run_dir} refused: the config differs from the run's in {', '.join(diff)}, which "
                          f"change what the search does; continue it as it was with: "
                          f"{' '.join([resume_command(run_dir, saved), *map(_quoted, kept)])} (or start a new run)")
    return {**placed(saved, c, overrides), **{k: c[k] for k in RUNTIME_KEYS if k in c}}


def _given_keys(overrides: list[str]) -> list[str]:
    keys = [o.split("=", 1)[0].lstrip("+~") for o in overrides]
    return [k for k in keys if k.split(".")[0] not in (*RUNTIME_KEYS, "hydra")]


def placed(saved: dict[str, Any], c: dict[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    """The run's config with the placement keys this command gives again (`_placement`); as saved outside Hydra."""
    return saved if overrides is None else {**saved, **_placement(saved, c, _given_keys(overrides))}


# Keys that say only where and how trainings run, not what is trained (a label's fingerprint is its protocol and
# corpus): a resume takes them from the command that continues the run (`dispatch=ray dispatch.address=auto`).
PLACEMENT_KEYS = ("dispatch",)


def _placement(saved: dict[str, Any], c: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """The run's dispatch node with what this command names of it: the launched node when it picks another
    dispatcher, else the saved node with the keys given again (its other non-default keys kept)."""
    import copy

    named = [k for k in keys if k.split(".")[0] in PLACEMENT_KEYS]
    out: dict[str, Any] = {}
    for top in PLACEMENT_KEYS:
        mine = [k for k in named if k.split(".")[0] == top]
        old, new = saved.get(top), c.get(top)
        if not mine:
            continue
        if not (isinstance(old, dict) and isinstance(new, dict)) or old.get("_target_") != new.get("_target_"):
            out[top] = copy.deepcopy(new)
            continue
        node = copy.deepcopy(old)
        for k in mine:
            path = k.split(".")[1:]
            if not path:
                continue
            at = node
            for part in path[:-1]:
                at[part] = at[part] if isinstance(at.get(part), dict) else {}
                at = at[part]
            value = select(c, k, "<unset>")
            if value == "<unset>":
                at.pop(path[-1], None)
            else:
                at[path[-1]] = copy.deepcopy(value)
        out[top] = node
    return out


def _quoted(override: str) -> str:
    import shlex

    return shlex.quote(override)


def _set_threads(n: Any) -> None:
    """BLAS threads (and torch's intra-op threads, where torch is loaded) for the surrogate: batches of ~48
    genomes are too small to gain from more than one thread, and on a shared 2-core machine extra threads mostly
    spin (20x slower measured; the numpy encoder 4x). A value out of range is left to `search.settings.settle`,
    which refuses it before anything is built. Unset (null): the library's default, one per core (the console
    script started BLAS at one thread: forge.shell.entry.blas_one_thread)."""
    if n is None:
        from forge.shell.entry import blas_threads_default

        n = blas_threads_default()
    if isinstance(n, int) and n >= 1:
        from threadpoolctl import threadpool_limits

        threadpool_limits(int(n), user_api="blas")
        if "torch" in sys.modules:  # a plug-in or user surrogate brought torch: its threads too
            sys.modules["torch"].set_num_threads(int(n))


def _brief(s: dict[str, Any]) -> dict[str, Any]:
    keys = ("status", "run_dir", "space", "backend", "algorithm", "seed", "generations_done", "evaluations",
            "archive_size", "hypervolume", "hypervolume_loss_params", "wall_s", "loss_predictor", "loss_interval",
            "least_violating")
    out = {k: s[k] for k in keys if k in s}
    if isinstance(s.get("loss_pairwise"), dict):  # what the odds say, not the curve (summary.json holds it)
        out["loss_pairwise"] = {k: s["loss_pairwise"].get(k) for k in ("predictor", "rule_out", "groups",
                                                                       "n_not_ruled_out")}
    from search.export import chosen_design  # the knee's array shape, precisions and batch (where reported)

    return out | ({"chosen": chosen_design(s["run_dir"])} if s.get("run_dir") else {})


def exit_code(summary: dict[str, Any]) -> int:
    """0 for a finished (or deliberately stopped) run; 130 / 143 for one stopped by Ctrl-C / SIGTERM."""
    if summary.get("status") != "interrupted":
        return 0
    return EXIT_SIGTERM if summary.get("interrupted_by") == "SIGTERM" else EXIT_SIGINT


def end_screen(summary: dict[str, Any], as_json: bool) -> None:
    """The last screen: the JSON brief (computed only here), or the front table and next commands. An interrupted
    run gets neither table nor `next:` (those commands refuse it): run() already printed how to continue."""
    if as_json:
        print(json.dumps(_brief(summary), indent=2))
    elif summary.get("status") != "interrupted":
        from search.console import show_end

        show_end(summary)


@forge_main("forge-search")
def _search_job(cfg: DictConfig) -> None:
    import gc

    gc.freeze()  # the command's own process: the ~10^5 objects of its imports never need collecting again
    summary = run(cfg)
    end_screen(summary, as_json=bool(cfg.get("quiet") or cfg.get("json")))
    if exit_code(summary):
        raise SystemExit(exit_code(summary))


def resume_argv(argv: list[str]) -> list[str]:
    """`resume=DIR` runs inside DIR: Hydra gets it as its run directory and writes no `.hydra/` there, so a
    resume leaves no empty outputs/search/<stamp>/ and keeps the run's own record of how it was started."""
    given = [_unquote(a.split("=", 1)[1]) for a in argv if a.startswith("resume=")]
    if not given or not Path(given[-1]).is_dir() or any(a.startswith("hydra.run.dir=") for a in argv) \
            or any(a in ("-m", "--multirun") for a in argv):
        return argv
    quoted = given[-1].replace("\\", "\\\\").replace("'", "\\'")  # Hydra's quoted-string escapes
    return [*argv, f"hydra.run.dir='{quoted}'", "hydra.output_subdir=null"]


def _unquote(value: str) -> str:
    """`resume='my runs/a'` (quoted for Hydra, spaces inside) names the folder `my runs/a`."""
    v = value.strip()
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"" else v


def search_main() -> None:
    """`forge-search`: exit 0 when complete or stopped, 130 / 143 when interrupted, 2 on bad input."""
    sys.argv = [sys.argv[0], *resume_argv(json_argv(sys.argv[1:]))]
    _search_job()


def json_argv(argv: list[str]) -> list[str]:
    """`--json` is not a Hydra override: it becomes `json=true` (the machine-readable last screen)."""
    return [a for a in argv if a != "--json"] + (["json=true"] if "--json" in argv else [])


@forge_main("forge-report")
def _report_job(cfg: DictConfig) -> None:
    from search.report import human
    from search.report import run as run_report

    out = run_report(cfg)
    print(json.dumps(out, indent=2) if cfg.get("json") else "\n".join(human(out)))


def report_main() -> None:
    """`forge-report`: a few lines and the page's path; `--json` for the whole report.json."""
    sys.argv = [sys.argv[0], *json_argv(sys.argv[1:])]
    _report_job()


@forge_main("forge-export")
def _export_job(cfg: DictConfig) -> None:
    from search.export import run as run_export

    out = run_export(cfg)
    print(json.dumps(out, indent=2) if cfg.get("json") else "\n".join(export_lines(out)))


def export_lines(s: dict[str, Any]) -> list[str]:
    """What forge-export wrote, where, and how to load it (`--json`: export_summary.json's content)."""
    from search.export_card import python_load
    from search.suggest import rel

    out, fmt = Path(s["out"]), s["format"]
    files = {"hf": "a transformers folder", "pt": "genome.yaml + model.pt", "json": "genome.json + model.safetensors"}
    lines = [f"exported {len(s['exported'])} genome(s) of {rel(s['run'])} (select={s['select']}, format={fmt}: "
             f"{files.get(fmt, 'genome.yaml + model.safetensors')} + MODEL_CARD.md each):"]
    lines += [f"  {rel(out / e['id'])}  {e['params']:,} parameters, weights {e['weights']}" for e in s["exported"]]
    first = rel(out / s["exported"][0]["id"]) if s["exported"] else rel(out)
    lines += [f"  note: {s['note']}"] if s.get("note") else []
    return [*lines, f"every field: {rel(out / run_folder.EXPORT_SUMMARY)}; in Python: "
                    + "; ".join(python_load(s.get("plugin_modules"), repr(first)))]


def export_main() -> None:
    """`forge-export`: what was written, in a few lines; `--json` for export_summary.json's content."""
    sys.argv = [sys.argv[0], *json_argv(sys.argv[1:])]
    _export_job()
