"""The run folder's layout, owned here: every file a `forge-*` command writes in its folder, by name, with the module
that writes it and those that read it back (issue 57). Renaming a file, or finding who reads it, is this module and
a grep for its constant: no other module spells a name below (tests/test_run_folder_layout.py checks the tree).

A search's folder (`outputs/search/<stamp>/` or `hydra.run.dir=`)::

    config.yaml  .hydra/{config,hydra,overrides}.yaml  cli.log  .forge.lock  plugins.json  summary.json
    archive.jsonl  pareto.jsonl  history.jsonl  labels.jsonl  coevolution.jsonl  stops.jsonl  labels.db  study.db
    front.csv  archive.csv  history.csv  state/{checkpoint.json, checkpoint.durable.json, loss_cache.jsonl,
    surrogate-v<N>.*, checkpoints/}  verify/{verify.json, verify.png, verified.jsonl, race.json, labels.db, weights/}

`forge-export out=` holds one folder per genome (genome.yaml or .json, model.safetensors or .pt, export.json,
MODEL_CARD.md; README.md in the HF format) and export_summary.json; `forge-report out=` report.html, report.json,
runs.csv and plots/{hv,hv_loss_params,fingerprint}.png. The other commands write summary.json in their own folder
(forge-label label_summary.json and stops.jsonl; forge-surrogate table.md; forge-serve afd.png or pools.png;
forge-hw's sweep side_by_side.csv). Hydra names `cli.log` after the job (`hydra.job.name`) and `multirun.yaml` in a
sweep folder. Standard library only: names, and the table of who reads what.
"""
from __future__ import annotations

# --- a search's folder ----------------------------------------------------------------------------------------
CONFIG = "config.yaml"  # the run's settled config: search.cli writes it; resume, verify, export, report read it
HYDRA_DIR = ".hydra"  # Hydra's own record of the launch (forge.shell.run_guard takes it back for a refused command)
HYDRA_CONFIG = f"{HYDRA_DIR}/config.yaml"  # a run whose config.yaml is missing is read from this copy
HYDRA_HYDRA = f"{HYDRA_DIR}/hydra.yaml"  # the launch's searchpath and job settings (search.carried)
HYDRA_OVERRIDES = f"{HYDRA_DIR}/overrides.yaml"  # the launch's own overrides (search.carried, backends.side_by_side)
HYDRA_MULTIRUN = "multirun.yaml"  # a sweep folder's record (forge.disk.redact masks it)
JOB_LOG = "cli.log"  # Hydra's job log (the job name is the CLI module's)
LOCK = ".forge.lock"  # forge.disk.lock: who holds the folder (one writer per run folder)
PLUGINS = "plugins.json"  # forge.shell.plugin_use: the plug-in modules the run imported (data, never imported from)
SUMMARY = "summary.json"  # search.summary (and every command's own folder); search.run_files checks its schema
ARCHIVE = "archive.jsonl"  # search.runlog: every evaluation, append-only
PARETO = "pareto.jsonl"  # search.runlog: the front, replaced each generation; export, verify, report read it
HISTORY = "history.jsonl"  # search.runlog: one row per generation
LABELS = "labels.jsonl"  # search.coevolution: labels trained during the run
COEVOLUTION = "coevolution.jsonl"  # search.coevolution: each refit
STOPS = "stops.jsonl"  # search.coevolution_stop, forge.labelling.cli: trainings stopped early
LABEL_DB = "labels.db"  # the run's label store when training (search.build, search.components)
STUDY = "study.db"  # search.optuna_study (optuna_study=true)
FRONT_CSV, ARCHIVE_CSV, HISTORY_CSV = "front.csv", "archive.csv", "history.csv"  # search.tables
STATE_DIR = "state"
CHECKPOINT = f"{STATE_DIR}/checkpoint.json"  # search.state: everything the next generation depends on
DURABLE = f"{STATE_DIR}/checkpoint.durable.json"  # search.ledger: the checkpoint once its logs were fsynced
LOSS_CACHE = f"{STATE_DIR}/loss_cache.jsonl"  # search.ledger: a pure cache, rebuilt from archive.jsonl
REFIT_STEM = "surrogate-v{version}"  # in state/: search.coevolution's refit of surrogate version N (its checkpoint)
CHECKPOINTS_DIR = "checkpoints"  # trainings' step checkpoints (forge-verify's race, forge-surrogate save_ckpt=true)
TRAIN_CHECKPOINTS = f"{STATE_DIR}/{CHECKPOINTS_DIR}"  # search.coevolution_stop: those of paused trainings
# --- forge-verify's folder (`verify/` in the run by default) ----------------------------------------------------
VERIFY_DIR = "verify"
VERIFY_JSON, VERIFY_PNG = "verify.json", "verify.png"  # search.verify writes; search.verify_report reads
VERIFIED = "verified.jsonl"  # search.verify: the trained picks; search.evaluated reads it for export select=id:
RACE = "race.json"  # search.race: the race's rungs and stops
VERIFY_LABEL_DB = f"{VERIFY_DIR}/{LABEL_DB}"  # verify's own store when the run has a protocol
WEIGHTS_DIR = "weights"  # the trained picks' weights (search.verify), read by export select=id:
# --- forge-export's out= --------------------------------------------------------------------------------------
GENOME_YAML, GENOME_JSON = "genome.yaml", "genome.json"
WEIGHTS_SAFETENSORS, WEIGHTS_PT = "model.safetensors", "model.pt"
EXPORT_JSON = "export.json"  # what one exported folder holds (its plug-in modules: search.export reads them back)
EXPORT_SUMMARY = "export_summary.json"  # the export as a whole (search.cli prints it)
MODEL_CARD = "MODEL_CARD.md"  # search.export_card
HF_CARD = "README.md"  # search.hf_export: the Hugging Face model card
# --- forge-report's out= ----------------------------------------------------------------------------------------
REPORT_HTML, REPORT_JSON, RUNS_CSV = "report.html", "report.json", "runs.csv"
PLOTS_DIR = "plots"
HV_PNG, HV_LOSS_PARAMS_PNG, FINGERPRINT_PNG = "hv.png", "hv_loss_params.png", "fingerprint.png"
# --- the other commands' folders ----------------------------------------------------------------------------------
LABEL_SUMMARY = "label_summary.json"  # forge-label
SURROGATE_TABLE = "table.md"  # forge-surrogate mode=compare
AFD_PNG, POOLS_PNG = "afd.png", "pools.png"  # forge-serve
SIDE_BY_SIDE = "side_by_side.csv"  # forge-hw's sweep (backends.side_by_side)

# what a search writes in its folder, checked as data before a command reads it (search.run_files)
SEARCH_FILES = (CONFIG, SUMMARY, JOB_LOG, PLUGINS, ARCHIVE, PARETO, HISTORY, LABELS, COEVOLUTION, HISTORY_CSV,
                FRONT_CSV, ARCHIVE_CSV, CHECKPOINT, DURABLE, LOSS_CACHE, HYDRA_CONFIG)
HYDRA_FILES = (HYDRA_CONFIG, HYDRA_HYDRA, HYDRA_OVERRIDES)  # what Hydra writes before the task runs


def names() -> dict[str, str]:
    """Every file (or folder) name above, by its constant's name: what the layout test greps the tree for."""
    return {k: v for k, v in globals().items() if k.isupper() and isinstance(v, str)}
