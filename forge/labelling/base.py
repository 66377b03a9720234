"""What every dispatcher shares: the work itself (`train_one`, run in any process on any host) and the
bookkeeping around it (`_Base.train`): reuse stored results, claim a genome in the store before
training it, renew the claims while alive, store each outcome as it arrives, and hand back labels in
the order asked. `forge.labelling.dispatch` builds the local, Ray and Slurm dispatchers on it.
"""
from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol as TypingProtocol, Sequence

from forge.errors import ForgeError
from forge.genomes.genome import Genome, genome_from_dict
from forge.genomes.labels import Label
from forge.labelling.store import RETRY, LabelStore


class DispatchError(ForgeError):
    """A dispatcher that cannot run: missing optional extra, bad option."""


class Trainer(TypingProtocol):
    def train(self, genomes: Sequence[Genome]) -> list[Label]: ...


# ------------------------------------------------------------------------- the work itself
def train_one(genome_dict: dict, spec: Mapping[str, Any]) -> str:
    """Worker entry (any process, any host): train one genome, return its label as JSON.

    Exceptions become a `failed` label here (retried by the next run), so only a *lost* worker surfaces
    as a failure in the dispatcher.
    `spec` = {"protocol": {...}, "corpus": {...}} plain dicts; `spec["fault"]` is a test hook.
    """
    from forge.labelling.corpus import build_corpus
    from forge.labelling.train import Protocol, failure_label, train_genome

    genome = genome_from_dict(genome_dict)
    try:
        injected = _fault(spec.get("fault"), genome)
        if injected is not None:
            return injected.to_json()
        decide = None
        if spec.get("stop"):
            from forge.labelling.curves import decider

            decide = decider(spec["stop"], genome.id)
        return train_genome(genome, Protocol.from_config(spec["protocol"]), build_corpus(spec["corpus"]),
                            spec.get("weights_dir"), spec.get("logger"), spec.get("ckpt_dir"), spec.get("fp", ""),
                            decide).to_json()
    except Exception as e:  # a failing run never crashes the batch
        tb = traceback.format_exc(limit=3)
        disk = {"errno": e.errno, "path": str(e.filename or "")} if isinstance(e, OSError) and e.errno else {}
        return failure_label(genome, f"error: {type(e).__name__}: {e}", {"traceback": tb, **disk}).to_json()


def _fault(fault: Mapping[str, Any] | None, genome: Genome) -> Label | None:
    """Test hook: make specific genomes raise, hang, diverge, or kill their worker (once, via a marker file)."""
    if not fault or genome.id not in fault.get("ids", ()):
        return None
    kind = fault["kind"]
    if kind == "diverge":
        return Label(genome, float("inf"), {"protocol": "injected"}, "non-finite training loss (nan) at step 0",
                     status="diverged")
    if kind == "raise":
        raise RuntimeError("injected failure")
    if kind == "hang":
        time.sleep(3600)
    if kind in ("die", "die_once"):
        marker = os.path.join(fault.get("dir", "."), f"died-{genome.id}")
        if kind == "die" or not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(137)
    return None


def _from_json(s: str) -> Label:
    return Label.from_json(s)


@dataclass
class _Base:
    """Shared bookkeeping: claims in the store, ordering, failure labels, lease renewal."""

    protocol: dict[str, Any]
    corpus: dict[str, Any]
    store: LabelStore | str | None = None
    timeout_s: float = 3600.0
    retries: int = 2
    fault: dict[str, Any] | None = None
    on_label: Callable[[Label], None] | None = field(default=None, repr=False)
    retry: str = "failed"        # stored statuses trained again: none | failed | all (failed + diverged)
    lease_s: float = 60.0        # a claim lapses this long after its labeller stops renewing it
    wait_s: float = 1.0          # poll interval while another labeller holds a genome we need
    weights_dir: str | None = None  # keep each trained model here as <genome id>.safetensors (forge-verify)
    logger: dict[str, Any] | None = None  # a Lightning logger node for each training (forge.labelling.train.make_logger)
    ckpt_dir: str | None = None  # rung checkpoints (<id>-<fp>.ckpt): a stopped or killed training continues from its last rung
    stop: dict[str, Any] | None = None  # the stopping rule's spec (forge.fidelity.stopping.rule_spec); None: train in full
    promote: bool | None = None  # continue stored `stopped` trainings; None: exactly when no stopping rule is set

    def __post_init__(self) -> None:
        if isinstance(self.store, (str, os.PathLike)):
            self.store = LabelStore(self.store)
        if not self.timeout_s > 0 or self.retries < 0 or not self.lease_s > 0:
            raise DispatchError(f"dispatch.timeout_s = {self.timeout_s}, retries = {self.retries}, lease_s = "
                                f"{self.lease_s}; allowed: timeout_s > 0, retries >= 0, lease_s > 0")
        if self.retry not in RETRY:
            raise DispatchError(f"retry = {self.retry!r} is unknown; allowed: {' | '.join(RETRY)}")
        self._claims: dict[str, str] = {}
        self._busy: list[Genome] = []
        self._done: dict[str, Label] = {}
        self._by_id: dict[str, Genome] = {}
        self._fp, self._renewed = "", 0.0

    @property
    def spec(self) -> dict[str, Any]:
        stop = None
        if self.stop:
            from forge.labelling.curves import rung_steps
            from forge.labelling.train import Protocol

            p = Protocol.from_config(self.protocol)
            stop = {**self.stop, "store": self.store.url if isinstance(self.store, LabelStore) else None, "fp": self._fp,
                    "steps": rung_steps(p.steps, p.eta, p.rungs)}
        return {"protocol": dict(self.protocol), "corpus": dict(self.corpus), "fault": self.fault,
                "weights_dir": self.weights_dir, "logger": self.logger, "ckpt_dir": self.ckpt_dir, "fp": self._fp,
                "stop": stop}

    def fingerprint(self) -> str:
        """This trainer's protocol fingerprint (builds the corpus once: its content hash is part of it)."""
        if not self._fp:
            from forge.labelling.train import protocol_fingerprint

            self._fp = protocol_fingerprint(self.protocol, self.corpus)
        return self._fp

    def train(self, genomes: Sequence[Genome]) -> list[Label]:
        """Labels for `genomes` in their order: stored results are reused, the rest claimed and trained;
        genomes another labeller holds are waited for (or taken over when its claim lapses)."""
        self._done, self._claims = {}, {}
        self._by_id = {g.id: g for g in genomes}
        todo = list(self._by_id.values())
        if self.store is not None or self.ckpt_dir:
            self.fingerprint()
        try:
            while todo:
                self._busy = []
                self._run(todo, self._record)
                todo = [g for g in self._busy if g.id not in self._done]
                if todo:
                    time.sleep(self.wait_s)
        finally:
            self._release()
        return [self._done[g.id] for g in genomes]

    def _take(self, g: Genome) -> bool:
        """Claim `g` before training it; False when a result is stored (recorded) or another labeller has it."""
        if self.store is None:
            return True
        promote = not self.stop if self.promote is None else bool(self.promote)
        got = self.store.claim(g, self._fp, str(self.protocol.get("name", "")), self.lease_s, self.retry, promote)
        if isinstance(got, str):
            self._claims[g.id] = got
            return True
        if got is None:
            self._busy.append(g)
        else:
            self._done[g.id] = got
        return False

    def _record(self, lab: Label) -> None:
        if self.store is not None:
            token = self._claims.pop(lab.genome_id, None)
            if token is not None:
                self.store.finish(lab, self._fp, token)
            else:
                self.store.put(lab, self._fp)
        self._done[lab.genome_id] = lab
        if self.on_label is not None:
            self.on_label(lab)

    def _heartbeat(self) -> None:
        """Renew our claims every lease_s/3, so a live labeller never loses a genome it is training."""
        if self.store is not None and self._claims and time.monotonic() - self._renewed >= self.lease_s / 3:
            self.store.renew([(gid, self._fp, tok) for gid, tok in self._claims.items()], self.lease_s)
            self._renewed = time.monotonic()

    def _release(self) -> None:
        """Claims left when the run stops early (Ctrl-C, an error) become failed: the next run retries them."""
        for gid, token in list(self._claims.items()):
            lab = self._failed(self._by_id[gid], "interrupted: the labeller stopped before this genome finished")
            self.store.finish(lab, self._fp, token)
        self._claims = {}

    def _failed(self, g: Genome, reason: str) -> Label:
        from forge.labelling.train import failure_label

        return failure_label(g, reason, {"protocol": self.protocol.get("name", ""), "dispatch": type(self).__name__})

    def _run(self, todo: list[Genome], emit: Callable[[Label], None]) -> None:
        raise NotImplementedError
