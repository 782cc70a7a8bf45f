"""Strict config sections: a key that no code reads is an error, not a silently ignored setting."""

from typing import Any, Iterable, Mapping

__all__ = ["reject_unknown"]


def reject_unknown(section: Mapping[str, Any], allowed: Iterable[str], name: str) -> None:
  """Raises ValueError naming the keys of `section` outside `allowed`, and the allowed keys.

  Shared by every config reader, so a typo fails alike everywhere:
  `unknown optimizer setting(s) ['lrr']; allowed: name, lr, ...` (`name` says what the section is)."""
  allowed = tuple(allowed)
  unknown = sorted(set(section.keys()) - set(allowed))
  if unknown:
    raise ValueError(f"unknown {name} setting(s) {unknown}; allowed: {', '.join(allowed)}")
