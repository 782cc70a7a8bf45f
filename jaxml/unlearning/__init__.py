"""Representation Unlearning (Almudevar & Ortega, ICML 2026): forgetting by learning a map
T on the frozen representation z = g(x) so that h(T(g(x))) keeps retained information and
sends forget representations to an uninformative point; plus the baselines and evaluation
of the unlearning benchmark.

Modules: `model` (classifier = encoder + linear head), `transform` (T), `losses`
(standard and zero-shot objectives), `api` (`make_method`, `unlearn`), `sampling`
(forget / retain batch builders), `baselines`, `evaluate`.
"""

__all__: list[str] = []
