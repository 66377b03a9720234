#!/usr/bin/env bash
# Wheel smoke test (issue 22 §1): build the wheel and sdist, `twine check` both, install the wheel
# NON-editable into a fresh venv, and run every console script from that install.
#
# The fresh venv sees the dependencies through one .pth line naming .venv's site-packages; .pth files
# there (the editable install's finder) are not processed, and the commands run from an empty temp cwd,
# so `forge` & co. can only come from the wheel (checked below). Usage, from the repo root:
#   .ci/wheel_smoke.sh                       # uses .venv/bin/python
#   WHEEL_SMOKE_DROP=backends/plena .ci/wheel_smoke.sh   # delete a subpackage from the install: must fail
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/forge-wheel.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
step() { printf '[wheel-smoke] %s\n' "$*"; }

step "build wheel + sdist"
"$PY" -m build --no-isolation --outdir "$TMP/dist" "$ROOT" >"$TMP/build.log" 2>&1 || { tail -30 "$TMP/build.log"; exit 1; }
"$PY" -m twine check --strict "$TMP"/dist/*
WHEEL=$(ls "$TMP"/dist/*.whl)
step "LICENSE in the wheel and the sdist, data licences beside the shipped labels"
"$PY" - "$TMP/dist" <<'EOF'
import sys, tarfile, zipfile
from pathlib import Path
dist = Path(sys.argv[1])
names = zipfile.ZipFile(next(dist.glob("*.whl"))).namelist()
for want in ("licenses/LICENSE", "forge_data/labels/LICENSE.md", "forge_data/surrogate/LICENSE.md"):
    assert any(n.endswith(want) for n in names), f"{want} is not in the wheel"
assert any(n.endswith("/LICENSE") for n in tarfile.open(next(dist.glob("*.tar.gz"))).getnames()), "no LICENSE in sdist"
print("ok: LICENSE (MIT) in the wheel and the sdist; data licences in forge_data")
EOF

step "fresh venv, wheel installed --no-deps"
"$PY" -m venv --without-pip "$TMP/venv"
SITE=$("$TMP/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$SITE/forge-deps.pth"
"$PY" -m pip --python "$TMP/venv/bin/python" install -q --no-deps --no-compile "$WHEEL"
if [ -n "${WHEEL_SMOKE_DROP:-}" ]; then
  step "dropping $WHEEL_SMOKE_DROP from the install (a wheel without it)"
  rm -rf "${SITE:?}/$WHEEL_SMOKE_DROP"
fi
export PATH="$TMP/venv/bin:$PATH" PYTHONNOUSERSITE=1
unset PYTHONPATH
mkdir "$TMP/work" && cd "$TMP/work"

# The checks below are independent of one another: each runs in its own folder, all at once (a 2-core machine
# runs them in about half the serial time); each one's output goes to its log, shown when it fails.
imports() {
python - "$SITE" "$ROOT" <<'EOF'
import importlib, pkgutil, sys
site, root = sys.argv[1], sys.argv[2]
for name in ("forge", "surrogate", "backends", "search", "forge_hf", "forge_conf", "forge_data"):
    mod = importlib.import_module(name)
    where = list(getattr(mod, "__path__", [])) or [mod.__file__]
    assert all(p.startswith(site) for p in where), f"{name} imported from {where}, not the wheel ({site})"
    for info in pkgutil.walk_packages(mod.__path__, name + "."):  # every subpackage and module imports
        if info.ispkg:
            importlib.import_module(info.name)
print("ok: all packages import from", site)
import forge, search.api
assert forge.search is search.api.search and forge.SearchResult is search.api.SearchResult  # forge/__init__'s lazy import
assert search.api.__file__.startswith(site), search.api.__file__
print("ok: forge.search resolves to the wheel's search.api (forge/__init__'s one lazy import)")
EOF
}

scripts() {  # every console script composes its config (--cfg job), two at a time
  SCRIPTS=$(python -c 'from importlib.metadata import distribution as d; print(" ".join(e.name for e in d("forge-nas").entry_points if e.group == "console_scripts"))')
  printf '%s\n' $SCRIPTS | xargs -P 2 -I{} sh -c '"$1/{}" --cfg job >/dev/null || { echo "FAIL: {} --cfg job"; exit 255; }' _ "$TMP/venv/bin"
  echo "ok: $SCRIPTS"
}

hw() {
  CONF=$(python -c 'import forge_conf, os; print(os.path.dirname(forge_conf.__file__))')
  NEEDS_GPU=gpu-measured   # on a machine without CUDA this backend must refuse in one line (exit 2)
  BACKENDS=$(ls "$CONF"/backend/*.yaml | xargs -n1 basename | sed 's/\.yaml$//' | grep -vx "$NEEDS_GPU" | paste -sd, -)
  forge-hw -m "backend=$BACKENDS" arch="$TMP/work/tiny.yaml" workload.prefill=16 workload.decode=4 quiet=true \
    hydra.sweep.dir=hw >hw.log 2>&1 || { tail -20 hw.log; exit 1; }
  n=$(grep -c '#[0-9]* : backend=' hw.log); [ "$n" -eq "$(echo "$BACKENDS" | tr , '\n' | wc -l)" ]
  if python -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    forge-hw backend=$NEEDS_GPU arch="$TMP/work/tiny.yaml" quiet=true hydra.run.dir=hwgpu
  else
    set +e; forge-hw backend=$NEEDS_GPU arch="$TMP/work/tiny.yaml" quiet=true hydra.run.dir=hwgpu 2>gpu.err; rc=$?; set -e
    [ "$rc" -eq 2 ] && [ "$(wc -l <gpu.err)" -eq 1 ] || { cat gpu.err; echo "FAIL: $NEEDS_GPU without CUDA: rc=$rc"; exit 1; }
  fi
  echo "ok: forge-hw -m backend=$BACKENDS"
}

search_report_export() {
  forge-search search.pop_size=4 search.offspring=4 search.generations=2 progress=false hydra.run.dir=run >search.log 2>&1 \
    || { tail -20 search.log; exit 1; }
  forge-report runs='[run]' hydra.run.dir=report >report.log 2>&1 || { tail -20 report.log; exit 1; }
  grep -q '<title>Forge</title>' report/report.html || { echo "FAIL: report.html not rendered from the wheel's template"; exit 1; }
  forge-export run=run format=hf out=exported hydra.run.dir=export >export.log 2>&1 || { tail -20 export.log; exit 1; }
  python - <<'EOF'
import glob, torch
from transformers import AutoModelForCausalLM
folder = glob.glob("exported/*/config.json")[0].rsplit("/", 1)[0]
model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
out = model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=4, do_sample=False)
assert out.shape == (1, 7), out.shape
print("ok: forge-search (tiny) -> forge-report -> forge-export format=hf loads in transformers and generates")
EOF
}

serve() {
  forge-serve afd quiet=true hydra.run.dir=serve >serve.log 2>&1 || { tail -20 serve.log; exit 1; }
  echo "ok: forge-serve afd"
}

cat >tiny.yaml <<'EOF'
name: smoke-tiny
d_model: 64
block_size: 64
vocab_size: 256
mlp: swiglu
layers:
- {n_h: 4, n_kv: 2, d_qk: 16, d_v: 16, d_mlp: 128}
- {n_h: 2, n_kv: 1, d_qk: 32, d_v: 16, d_mlp: 96}
EOF
CHECKS="imports scripts hw search_report_export serve"
step "at once: imports from the wheel; each console script's --cfg job; forge-hw on every backend;" \
  "forge-search (tiny) -> forge-report -> forge-export format=hf; forge-serve afd"
declare -A PIDS
for c in $CHECKS; do
  mkdir "$c" && (cd "$c" && set -e && "$c") >"$c.log" 2>&1 &
  PIDS[$c]=$!
done
failed=0
for c in $CHECKS; do
  if wait "${PIDS[$c]}"; then grep '^ok:' "$c.log" || true
  else echo "FAIL: $c"; tail -30 "$c.log"; failed=1; fi
done
[ "$failed" -eq 0 ] || exit 1

step "PASS ($(basename "$WHEEL"))"
