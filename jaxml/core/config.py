"""Strict config sections (a key that no code reads is an error, not a silently ignored setting) and the
one cache folder every package writes under."""

import os
from typing import Any, Iterable, Mapping

__all__ = ["reject_unknown", "cache_dir"]


def cache_dir(*parts: str) -> str:
  """<root>/<parts...>, root = $JAXML_CACHE_DIR, else $XDG_CACHE_HOME/jaxml, else ~/.cache/jaxml."""
  root = os.environ.get("JAXML_CACHE_DIR") or os.path.join(
      os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "jaxml")
  return os.path.join(root, *parts)


def reject_unknown(section: Mapping[str, Any], allowed: Iterable[str], name: str) -> None:
  """Raises ValueError naming the keys of `section` outside `allowed`, and the allowed keys.

  Shared by every config reader, so a typo fails alike everywhere:
  `unknown optimizer setting(s) ['lrr']; allowed: name, lr, ...` (`name` says what the section is)."""
  allowed = tuple(allowed)
  unknown = sorted(set(section.keys()) - set(allowed))
  if unknown:
    raise ValueError(f"unknown {name} setting(s) {unknown}; allowed: {', '.join(allowed)}")
