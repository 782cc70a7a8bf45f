"""Plain-data defaults of the unlearning extensions that configs read (configs may import a method's
`defaults` module only): the one source of `ru_zs_anchor`'s own settings."""

from typing import Any

# ru_zs_anchor: the identity-anchor weights to try (largest first; half-decades from 1 down) and the forget-row
# accuracy, in points, at or below which a weight still forgets (class forgetting: Retrain's is 0).
ANCHOR_DEFAULTS: dict[str, Any] = {"anchor_grid": (1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001), "anchor_tol": 1.0}
