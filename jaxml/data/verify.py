"""Integrity of a data root: `MANIFEST.sha256` lists `<sha256>  <bytes>  <relative path>` per file.

  python -m jaxml.data.verify                 # check the default data root (data/ in the checkout)
  python -m jaxml.data.verify --root=PATH     # check another root that carries a manifest
  python -m jaxml.data.verify --root=PATH --write   # (re)write the manifest of your own data

The readers call `check_file` on every file they open; a root without a manifest is read unchecked."""

import argparse
import hashlib
import os
import pathlib
import sys

__all__ = ["MANIFEST", "DataIntegrityError", "default_root", "read_manifest", "sha256_of", "check_file",
           "verify_root", "write_manifest", "main"]

MANIFEST = "MANIFEST.sha256"


class DataIntegrityError(ValueError):
  """A data file differs from its manifest entry (missing, wrong size or wrong sha256)."""


def default_root() -> pathlib.Path:
  """`data/` in the checkout that holds this package (the copies shipped with the repository)."""
  return pathlib.Path(__file__).resolve().parents[2] / "data"


def read_manifest(root: str | os.PathLike) -> dict[str, tuple[int, str]] | None:
  """{relative path: (size, sha256)} from `root/MANIFEST.sha256`, or None when the root has none."""
  path = pathlib.Path(root) / MANIFEST
  if not path.is_file():
    return None
  entries = {}
  for number, line in enumerate(path.read_text().splitlines(), 1):
    line = line.strip()
    if not line or line.startswith("#"):
      continue
    parts = line.split(maxsplit=2)
    if len(parts) != 3 or not parts[1].isdigit() or len(parts[0]) != 64:
      raise DataIntegrityError(f"{path}:{number}: malformed manifest line {line!r}; expected "
                               "'<sha256>  <size>  <relative path>'; restore it with `git checkout -- data/"
                               f"{MANIFEST}`")
    entries[parts[2]] = (int(parts[1]), parts[0])
  return entries


def sha256_of(path: str | os.PathLike) -> str:
  with open(path, "rb") as f:
    return hashlib.file_digest(f, "sha256").hexdigest()


def _restore_hint(root: pathlib.Path, rel: str) -> str:
  if root.resolve() == default_root():
    return (f"restore it with `git checkout -- data/{rel}` in the checkout "
            f"(sources for a re-download: data/{rel.split('/')[0]}/README.md)")
  return (f"copy data/{rel} from a clean clone of the repository into {root}, or rewrite that root's "
          f"manifest if you changed the file on purpose (`python -m jaxml.data.verify --root={root} --write`)")


def _problem(root: pathlib.Path, rel: str, size: int, sha: str) -> str | None:
  """None if `root/rel` matches (size, sha); else one line saying what differs and how to fix it."""
  path = root / rel
  if not path.is_file():
    return f"data file {path} is missing (expected {size} bytes, sha256 {sha[:12]}...); {_restore_hint(root, rel)}"
  actual = path.stat().st_size
  if actual != size:
    what = "truncated" if actual < size else "longer than expected"
    return (f"data file {path} is {what}: {actual} bytes, expected {size} bytes (sha256 {sha[:12]}...); "
            f"{_restore_hint(root, rel)}")
  digest = sha256_of(path)
  if digest != sha:
    return (f"data file {path} is altered: sha256 {digest[:12]}..., expected {sha[:12]}... ({size} bytes); "
            f"{_restore_hint(root, rel)}")
  return None


def check_file(root: str | os.PathLike, path: str | os.PathLike) -> None:
  """Raises DataIntegrityError (one line) if `path` under `root` differs from the root's manifest; files it
  does not list, and roots without a manifest, pass unchecked."""
  root = pathlib.Path(root)
  entries = read_manifest(root) or {}
  rel = pathlib.Path(os.path.relpath(pathlib.Path(path), root)).as_posix()
  if rel in entries and (problem := _problem(root, rel, *entries[rel])):
    raise DataIntegrityError(problem)


def verify_root(root: str | os.PathLike) -> tuple[int, list[str]]:
  """(number of files checked, one line per problem) for every manifest entry of `root`."""
  root = pathlib.Path(root)
  entries = read_manifest(root)
  if entries is None:
    return 0, [f"{root / MANIFEST} does not exist; write one with "
               f"`python -m jaxml.data.verify --root={root} --write`"]
  problems = [p for rel, (size, sha) in sorted(entries.items()) if (p := _problem(root, rel, size, sha))]
  problems += [f"data file {root / rel} is not in {MANIFEST}; add it with "
               f"`python -m jaxml.data.verify --root={root} --write`" for rel in _listing(root) if rel not in entries]
  return len(entries), problems


def _listing(root: pathlib.Path) -> list[str]:
  """Every file below root except the manifest and dot-files, as sorted '/'-separated relative paths."""
  rels = (p.relative_to(root) for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)
  return sorted(rel.as_posix() for rel in rels if not any(part.startswith(".") for part in rel.parts))


def write_manifest(root: str | os.PathLike) -> int:
  """Writes `root/MANIFEST.sha256` over every file below root (dot-files skipped); returns the count."""
  root = pathlib.Path(root)
  files = _listing(root)
  lines = ["# sha256  size  path (relative to this folder); check with `python -m jaxml.data.verify`"]
  lines += [f"{sha256_of(root / rel)}  {(root / rel).stat().st_size}  {rel}" for rel in files]
  tmp = root / f".{MANIFEST}.tmp"
  tmp.write_text("\n".join(lines) + "\n")
  os.replace(tmp, root / MANIFEST)
  return len(files)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m jaxml.data.verify", description=__doc__.splitlines()[0])
  parser.add_argument("--root", default=None, help="data root (default: $JAXML_DATA_DIR, else data/ in the checkout)")
  parser.add_argument("--write", action="store_true", help="write the manifest instead of checking it")
  args = parser.parse_args(argv)
  root = pathlib.Path(args.root or os.environ.get("JAXML_DATA_DIR") or default_root()).expanduser()
  if not root.is_dir():
    print(f"error: data root {root} does not exist", file=sys.stderr)
    return 2
  if args.write:
    print(f"wrote {root / MANIFEST} ({write_manifest(root)} files)")
    return 0
  count, problems = verify_root(root)
  for line in problems:
    print(f"error: {line}", file=sys.stderr)
  if problems:
    print(f"{len(problems)} of {count} files in {root} fail the manifest", file=sys.stderr)
    return 1
  print(f"ok: {count} files in {root} match {MANIFEST}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
