"""Plain-data names that configs read (configs may import a method's `defaults` module only): the one source of
the baselines, the ablations (ProbeConfig overrides) and the validation grids of X-EviProbe."""

BASELINES = ("msp", "entropy", "temp_scaling", "energy", "gnnsafe", "maha_q", "maha_z", "gkde",
             "mc_dropout", "mc_dropout_mi", "ensemble", "ensemble_var", "epn", "gpn")
# Propagation grid chosen on the CSBM validation benchmark (spec §9.2; `configs/eviprobe_graphs.py:validate`):
# rule x teleport a; 'none' does not depend on a. 'strength' is the spec's linear rule.
GRID: dict[str, dict] = {f"grid_{r}_a{a}": dict(propagation=r, teleport=a) for r in ("strength", "log", "tau")
                         for a in (0.1, 0.3, 0.5)}
GRID["grid_none"] = dict(propagation="none")
# misclassification read-outs (`ProbeConfig.misc_readout`); `probe.score` returns each under its name and the chosen
# one as 'misc'
MISC_READOUTS = ("u_alea", "class_split", "total_entropy", "expected_entropy", "dissonance", "msp")
# misclassification read-out rows (chosen on the same validation benchmark; `experiments.eviprobe_graphs.misc_choice`):
# X-EviProbe with only `misc_readout` changed, so their OOD scores equal OURS's
MISC_GRID: dict[str, dict] = {f"misc_{r}": dict(misc_readout=r) for r in MISC_READOUTS}
# the extension's guards γ_o (own, too far) x γ_c (centre, too close), chosen on the same validation benchmark
GUARD_VALUES = (0.0, 0.02, 0.05, 0.1, 0.2)
GUARD_GRID: dict[str, dict] = {f"guard_o{o}_c{c}": dict(own_guard=o, centre_guard=c)
                               for o in GUARD_VALUES for c in GUARD_VALUES if o or c}
# ablation name -> ProbeConfig overrides (spec A1-A9, teleport sweep) or a read-out variant
SPEC_ABLATIONS: dict[str, dict] = {
    "A1_latent_only": dict(fusion="latent"), "A2_output_only": dict(fusion="output"),
    "A3_no_prop": dict(propagation="none"), "A3b_tau_only": dict(propagation="tau"),
    "A4_classwise": dict(propagation="classwise"), "A5_sym_norm": dict(norm="sym"),
    "A6_chi2": dict(typicality="chi2"), "A6_conformal": dict(typicality="conformal"),
    "A6_cosine": dict(typicality="cosine"), "A7_temperature": dict(temperature=True),
    "A8_z": dict(latent="z"), "A8_q_and_z": dict(latent="both"), "A9_log": dict(propagation="log"),
    "a0.3": dict(teleport=0.3), "a0.5": dict(teleport=0.5), "ours_mi": {}, "ours_neg_log_evidence": {},
    "linear": dict(propagation="strength", teleport=0.1),   # the spec's §2 rule, kept as an ablation
}
ABLATIONS: dict[str, dict] = SPEC_ABLATIONS | GRID | MISC_GRID | GUARD_GRID
