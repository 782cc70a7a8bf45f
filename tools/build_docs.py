"""Render the docs tables from the committed rows files (`make docs`; `--check` verifies).

Every results table in `README.md` and `docs/**/*.md` sits between two markers:

    <!-- table: smile/headline -->
    ... generated markdown ...
    <!-- /table -->

`smile/headline` names table `headline` of `docs/methods/rows/smile.json`; `readme` names the README's
results table, one row per method from each rows file's `readme` entry. A rows file is

    {"method": "smile",
     "readme": {"claim": ..., "protocol": ..., "result": ..., "verdict": ..., "beyond": ..., "link": ...},
     "tables": {"headline": {"columns": [["key", "header"], ...], "note": "...",
                             "rows": [{"key": cell, ..., "source": "command @ commit"}]}}}

A cell is a string, a number (printed with the table's `digits`, default 3) or [mean, s.e.]
(printed "mean ± s.e."). Every row carries `source` (the command or preset and the commit its numbers
came from); the sources are listed under each table. Adding a row to a rows file and running
`make docs` is all a new result needs.
"""

from __future__ import annotations

import argparse
import difflib
import json
import pathlib
import re
import sys
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
ROWS_DIR = ROOT / "docs" / "methods" / "rows"
METHODS = ("smile", "emf", "sol", "unlearning", "eviprobe", "causal_reward")
README_COLUMNS = (("method", "method"), ("claim", "paper claim"), ("protocol", "what we ran (authors' protocol)"),
                  ("result", "result"), ("verdict", "verdict"), ("beyond", "beyond the paper"), ("link", "details"))
MAX_README_WORDS = 40
MARKER = re.compile(r"(<!-- table: (?P<name>[\w/]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


def load_rows(rows_dir: pathlib.Path = ROWS_DIR) -> dict[str, dict]:
  """Every method's rows file, keyed by method name."""
  out = {}
  for method in METHODS:
    path = rows_dir / f"{method}.json"
    if path.exists():
      out[method] = json.loads(path.read_text())
  return out


def fmt(cell: Any, digits: int) -> str:
  """One table cell: strings as they are, numbers to `digits` decimals, [mean, se] as 'mean ± se'."""
  if cell is None:
    return ""
  if isinstance(cell, str):
    return cell.replace("|", "\\|").replace("\n", " ")
  if isinstance(cell, bool):
    return "yes" if cell else "no"
  if isinstance(cell, (int, float)):
    return f"{cell:.{digits}f}" if isinstance(cell, float) else str(cell)
  if isinstance(cell, list) and len(cell) == 2:
    return f"{cell[0]:.{digits}f} ± {cell[1]:.{digits}f}"
  raise ValueError(f"cannot format cell {cell!r}")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(r) + " |" for r in rows]
  return "\n".join(lines) + "\n"


def render_table(table: dict) -> str:
  """A rows-file table as markdown, then its note and the sources of its rows."""
  digits = table.get("digits", 3)
  keys = [c[0] for c in table["columns"]]
  for row in table["rows"]:
    if "source" not in row:
      raise ValueError(f"row without a source: {row}")
    unknown = set(row) - set(keys) - {"source"}
    if unknown:
      raise ValueError(f"row has keys that are not columns: {sorted(unknown)}")
  body = markdown_table([c[1] for c in table["columns"]],
                        [[fmt(row.get(k), digits) for k in keys] for row in table["rows"]])
  if table.get("note"):
    body += "\n" + table["note"] + "\n"
  sources = list(dict.fromkeys(row["source"] for row in table["rows"]))
  body += "\n" + ("Source: " if len(sources) == 1 else "Sources: ") + "; ".join(sources) + ".\n"
  return body


def render_readme(rows: dict[str, dict]) -> str:
  """The README's one results table: one row per method, no cell over MAX_README_WORDS words."""
  out = []
  for method in METHODS:
    entry = dict(rows[method]["readme"])
    entry.setdefault("method", f"`{method}`")
    entry["link"] = f"[{method}.md](docs/methods/{method}.md)"
    for key, cell in entry.items():
      if len(str(cell).split()) > MAX_README_WORDS:
        raise ValueError(f"README cell {method}.{key} has more than {MAX_README_WORDS} words")
    out.append([fmt(entry.get(k), 3) for k, _ in README_COLUMNS])
  return markdown_table([h for _, h in README_COLUMNS], out)


def render(text: str, rows: dict[str, dict]) -> str:
  """`text` with every marked table regenerated from `rows`."""
  def replace(match: re.Match) -> str:
    name = match.group("name")
    if name == "readme":
      body = render_readme(rows)
    else:
      method, _, table = name.partition("/")
      if method not in rows or table not in rows[method].get("tables", {}):
        raise KeyError(f"no table {table!r} in docs/methods/rows/{method}.json")
      body = render_table(rows[method]["tables"][table])
    return match.group(1) + body + match.group(4)
  return MARKER.sub(replace, text)


def doc_files(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
  return [root / "README.md"] + sorted((root / "docs").rglob("*.md"))


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--check", action="store_true", help="exit 1 if a committed table differs from its rows")
  args = parser.parse_args(argv)
  rows = load_rows()
  stale = []
  for path in doc_files():
    text = path.read_text()
    new = render(text, rows)
    if new == text:
      continue
    if args.check:
      stale.append(path)
      sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                 str(path.relative_to(ROOT)), "rebuilt from rows", n=1))
    else:
      path.write_text(new)
      print(f"rebuilt {path.relative_to(ROOT)}")
  if stale:
    print(f"{len(stale)} file(s) differ from docs/methods/rows; run `make docs`", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
