"""Plain-data defaults that configs read (configs may import a method's `defaults` module only): the
one source of `ru_zs_anchor`'s own settings and of every method's validation grid."""

from typing import Any

# ru_zs_anchor: the identity-anchor weights to try (largest first; half-decades from 1 down) and the forget-row
# accuracy, in points, at or below which a weight still forgets (class forgetting: Retrain's is 0).
ANCHOR_DEFAULTS: dict[str, Any] = {"anchor_grid": (1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001), "anchor_tol": 1.0}

# Validation grids, one setting per method ({method: (setting, values)}): the config's `grids` read them
# from here. The RU rows use the reference beta grid.
_BETAS = (1e-4, 1e-3, 1e-2, 0.1, 1.0)
_LRS = (1e-4, 1e-3, 1e-2)
GRIDS: dict[str, tuple[str, tuple]] = {
    "ru": ("beta", _BETAS), "ru_val": ("beta", _BETAS), "ru_zs": ("beta", _BETAS), "ru_uniform": ("beta", _BETAS),
    "ru_zs_uniform": ("beta", _BETAS), "finetune": ("lr", (1e-3, 1e-2)), "grad_ascent": ("lr", _LRS),
    "neggrad_plus": ("lr", _LRS), "random_labels": ("lr", _LRS), "l1_sparse": ("lr", _LRS), "salun": ("lr", _LRS),
    "scrub": ("lr", (1e-4, 5e-4, 2e-3)), "boundary_shrink": ("lr", _LRS), "bad_teacher": ("lr", _LRS),
    "head_only": ("beta", _BETAS), "emmn": ("impair_lr", (1e-3, 1e-2, 1e-1)), "jit": ("lr", _LRS),
    "sisa": ("lr", (1e-3, 3e-3)), "unsir": ("impair_lr", (1e-3, 1e-2, 5e-2)), "gkt": ("lr", _LRS),
}
