"""Multi-fidelity labels (issue 52): the decisions about trainings read at rungs of their budget, without torch.

stopping (the curve model mapping a partial curve and the surrogate's prior to a projected final loss with an
out-of-sample interval; P(enter the front) with exact costs; the rules behind one `decide` interface: the front
rule, no stopping, ASHA, a race step's pause) · moasha (syne-tune's own MOASHA scheduler as a rule, optional
extra) · race (forge-verify's race of its k picks: who can still be best at each rung). The trainings themselves,
their curves and checkpoints, live in forge.labelling (curves, train); the search hands these rules the costs
and priors it knows (search.stop_inputs, search.race).

May import forge.errors and forge.disk only: the labelling workers and the search both read these rules.
"""
