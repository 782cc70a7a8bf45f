"""Strict config sections: a key that no code reads is an error, not a silently ignored setting."""

from typing import Any, Iterable, Mapping

__all__ = ["reject_unknown"]


def reject_unknown(section: Mapping[str, Any], allowed: Iterable[str], name: str) -> None:
  """Raises ValueError naming the keys of `section` outside `allowed`, and the allowed keys.

  Shared by every config reader (core optimizer, method settings), so a typo such as `lrr` fails
  with the same informative message everywhere: `unknown optimizer setting(s) ['lrr']; allowed: name, lr, ...`.

  Args:
    section: a dict or ConfigDict; only its top-level keys are checked.
    allowed: the keys the reader knows, in the order to list them.
    name: what the section is, for the message (e.g. "optimizer", "SOL", "gpn").
  """
  allowed = tuple(allowed)
  unknown = sorted(set(section.keys()) - set(allowed))
  if unknown:
    raise ValueError(f"unknown {name} setting(s) {unknown}; allowed: {', '.join(allowed)}")
