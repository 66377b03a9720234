"""The labelling system: how real labels are produced and kept.

train (the Lightning train-from-scratch oracle and its protocols) · corpus and tokenizer (token streams)
· store (the label database behind one URL) · store_db (opening that database: engine, table, refusing what is
not a store) · dispatch (local, Ray, Slurm) · cli (`forge-label`).
It uses the `forge` core (genome, model, labels format); the core never imports it.

May import forge.errors, forge.disk, forge.genomes, forge.runtime, forge.plugins, forge.spaces, forge.lm,
forge.fidelity and forge.shell (`forge-label` is a command): every package of the core, at the top of its order.
"""
