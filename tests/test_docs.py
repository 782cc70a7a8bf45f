"""The docs as a product: tables equal what the rows files render, runnable snippets run, sizes stay
within bounds, images resolve, and no internal bookkeeping labels appear in docs, code, configs or tests."""

import importlib.util
import json
import pathlib
import re
import select
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
METHOD_PAGES = sorted((ROOT / "docs" / "methods").glob("*.md"))


def _builder():
  spec = importlib.util.spec_from_file_location("build_docs", ROOT / "tools" / "build_docs.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


build_docs = _builder()


# ---------------------------------------------------------------- tables


def test_committed_tables_equal_what_the_rows_render():
  assert build_docs.main(["--check"]) == 0, "run `make docs`"


def test_check_mode_catches_an_edited_table():
  rows = build_docs.load_rows()
  text = (ROOT / "docs" / "methods" / "smile.md").read_text()
  assert "1.847 ± 0.092" in text
  edited = text.replace("1.847 ± 0.092", "1.900 ± 0.092", 1)
  assert build_docs.render(edited, rows) == text          # the edit is undone from the rows
  assert build_docs.render(text, rows) == text


def test_cells_and_sources():
  assert build_docs.fmt([1.8471, 0.0923], 3) == "1.847 ± 0.092"
  assert build_docs.fmt(0.5, 2) == "0.50" and build_docs.fmt(7, 3) == "7" and build_docs.fmt("a|b", 3) == "a\\|b"
  table = {"columns": [["m", "method"], ["x", "x"]], "rows": [{"m": "a", "x": [1.0, 0.1], "source": "cmd @ abc"},
                                                              {"m": "b", "x": 2.0, "source": "cmd @ abc"}]}
  out = build_docs.render_table(table)
  assert out.splitlines()[:4] == ["| method | x |", "|---|---|", "| a | 1.000 ± 0.100 |", "| b | 2.000 |"]
  assert out.rstrip().endswith("Source: cmd @ abc.")
  with pytest.raises(ValueError, match="source"):
    build_docs.render_table({"columns": [["m", "m"]], "rows": [{"m": 1}]})
  with pytest.raises(ValueError, match="not columns"):
    build_docs.render_table({"columns": [["m", "m"]], "rows": [{"m": 1, "y": 2, "source": "s"}]})


def test_readme_cells_stay_short_and_every_method_has_a_row():
  rows = build_docs.load_rows()
  assert set(rows) == set(build_docs.METHODS)
  table = build_docs.render_readme(rows)
  assert len(table.splitlines()) == 2 + len(build_docs.METHODS)
  long = json.loads(json.dumps(rows))
  long["sol"]["readme"]["result"] = "word " * 41
  with pytest.raises(ValueError, match="more than 40 words"):
    build_docs.render_readme(long)


def test_every_rows_table_is_shown_and_every_marker_has_rows():
  rows = build_docs.load_rows()
  text = "".join(p.read_text() for p in build_docs.doc_files())
  marked = set(re.findall(r"<!-- table: ([\w/]+) -->", text))
  wanted = {f"{m}/{t}" for m, r in rows.items() for t in r["tables"]} | {"readme"}
  assert marked == wanted


# ---------------------------------------------------------------- sizes and links


def test_sizes():
  assert len((ROOT / "README.md").read_text().splitlines()) <= 200
  for page in METHOD_PAGES:
    assert len(page.read_text().splitlines()) <= 300, page.name
  total = sum(len(p.read_text().splitlines()) for p in (ROOT / "docs").rglob("*.md"))
  assert total <= 2500
  assert {p.stem for p in METHOD_PAGES} == set(build_docs.METHODS)


def test_images_and_local_links_resolve_and_no_image_is_orphaned():
  used = set()
  for page in build_docs.doc_files():
    for target in re.findall(r"\]\(([^)#\s]+)\)", page.read_text()):
      if target.startswith("http"):
        continue
      path = (page.parent / target).resolve()
      assert path.exists(), f"{page.relative_to(ROOT)} links to missing {target}"
      used.add(path)
  images = set((ROOT / "docs").rglob("*.png"))
  assert images <= used, f"unreferenced images: {sorted(str(p.relative_to(ROOT)) for p in images - used)}"


# ---------------------------------------------------------------- runnable snippets

RUNNABLE = re.compile(r"<!-- runnable -->\n```python\n(.*?)```", re.S)
SNIPPETS = [(p, i, code) for p in [ROOT / "README.md", *METHOD_PAGES] for i, code in enumerate(RUNNABLE.findall(p.read_text()))]


def test_readme_and_every_method_page_have_a_runnable_snippet():
  assert {p.name for p, _, _ in SNIPPETS} == {"README.md"} | {p.name for p in METHOD_PAGES}


# Each snippet runs in its own process, a fork of one interpreter per test worker that has only imported the
# third-party libraries (never jaxml, never a backend: no device or compiled program is inherited): a fresh
# process and a fresh `__main__` namespace, as `python -c` gives, without paying those imports once per snippet.
# A snippet must import every name it uses; it sees the libraries' modules already loaded, as after its own imports.
_FORK_SERVER = r"""
import builtins, json, os, sys, traceback
import jax, jax.numpy, numpy, optax, flax.linen  # noqa: F401  (preloaded for the forks; no backend is created)
assert not jax._src.xla_bridge._backends, "the fork server must not start a backend"
for line in sys.stdin:
  req = json.loads(line)
  pid = os.fork()
  if pid == 0:
    fd = os.open(os.devnull, os.O_RDONLY); os.dup2(fd, 0)
    for path, target in ((req["out"], 1), (req["err"], 2)):
      os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), target)
    sys.argv = ["-c"]
    rc = 0
    try:
      exec(compile(req["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit as e:
      rc = e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:
      traceback.print_exc()
      rc = 1
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(rc)
  _, status = os.waitpid(pid, 0)
  print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)
"""


def _fork_run(server: subprocess.Popen, code: str, out: pathlib.Path, err: pathlib.Path) -> int:
  """Runs `code` in a fork of `server`, its stdout and stderr written to `out` and `err`; its exit code."""
  server.stdin.write(json.dumps({"code": code, "out": str(out), "err": str(err)}) + "\n")
  server.stdin.flush()
  ready, _, _ = select.select([server.stdout], [], [], 300)
  assert ready, "a snippet ran for more than 300 s"
  return json.loads(server.stdout.readline())


@pytest.fixture(scope="module")
def fork_server():
  server = subprocess.Popen([sys.executable, "-c", _FORK_SERVER], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
  yield server
  server.stdin.close()
  try:
    server.wait(timeout=60)
  except subprocess.TimeoutExpired:   # a snippet that never returned: end the server with it
    server.kill()
    server.wait()


@pytest.mark.slow
@pytest.mark.parametrize("page,index,code", SNIPPETS, ids=[f"{p.stem}{i}" for p, i, _ in SNIPPETS])
def test_snippet_runs_in_a_fresh_interpreter(page, index, code, fork_server, tmp_path):
  del index
  out, err = tmp_path / "stdout", tmp_path / "stderr"
  returncode = _fork_run(fork_server, code, out, err)
  assert returncode == 0, f"{page.name}:\n{err.read_text()[-3000:]}"
  assert out.read_text().strip(), "a snippet prints what it shows"


def test_a_snippet_runs_in_its_own_process_and_namespace(fork_server, tmp_path):
  """The fork server's isolation: each snippet is its own process (`python -c`'s __name__ and argv), sees none of
  another snippet's names or global JAX settings, and its failure or exit code is reported."""
  def run(code):
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    return _fork_run(fork_server, code, out, err), out.read_text(), err.read_text()

  first = run("import os, sys, jax\nleft = 1\njax.config.update('jax_enable_x64', True)\n"
              "print(os.getpid(), __name__, sys.argv)")
  second = run("import os, jax.numpy as jnp\nprint(os.getpid(), jnp.ones(1).dtype)")
  assert first[0] == second[0] == 0, (first, second)
  assert first[1].split()[1:] == ["__main__", "['-c']"] and second[1].split()[1] == "float32"
  assert len({int(first[1].split()[0]), int(second[1].split()[0]), fork_server.pid}) == 3
  rc, _, err = run("print(left)")
  assert rc == 1 and "NameError: name 'left' is not defined" in err
  assert run("import sys\nsys.exit(3)")[0] == 3


# ---------------------------------------------------------------- internal labels

# The patterns and the examples below are written with character classes ([h]...) and joined pieces, so that
# this file passes its own scan.
LABELS = {
    "tracker number": r"(?i)\b[i]ssues?\s*#?\d+",
    "a tracker item's bar": r"(?i)\bthe [i]ssue's\b",
    "work label (letter and number)": r"\b[h][1-9]\d\b|/[h]\d+[/_]",
    "assistant worker": r"(?i)\b[h]elpers?\b|\b[h]elper's\b|\b[h]elpers'",
    "person who holds a task": r"(?i)\b[o]wners?\b",
    "a person leading the work": r"(?i)\b(?:the|by the|from the|with the) [l]ead\b(?!\s+(?:to|time)\b)|\b[l]ead's\b|\([l]ead\b",
    "lock-file recipe": r"\b[f]lock\s+/|\b[c]pu\.lock\b",
    "path outside the project": r"(?:^|[\s`'\"(])(?:\.\./)?[s]hared/",
    "work period": r"(?i)\b[s]essions?\b",
    "date of work": r"\b202[5-7]-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b",
    "link to a removed page": r"docs/[r]esults/",
}
SCANNED = ["README.md", "Makefile", "pyproject.toml", "docs", "jaxml", "configs", "tests", "experiments", "benchmarks",
           "tools"]
SUFFIXES = {".py", ".md", ".json", ".toml", ".sh", ".txt", ".cfg", ".yaml", ".yml", ""}


def _scanned_files():
  for name in SCANNED:
    path = ROOT / name
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
      if f.suffix in SUFFIXES and "__pycache__" not in f.parts:
        yield f


def label_hits() -> list[str]:
  """'path:line: kind: text' for every internal label in the scanned files."""
  hits = []
  patterns = {kind: re.compile(p) for kind, p in LABELS.items()}
  for f in _scanned_files():
    try:
      lines = f.read_text().splitlines()
    except UnicodeDecodeError:
      continue
    for n, line in enumerate(lines, 1):
      for kind, pattern in patterns.items():
        if pattern.search(line):
          hits.append(f"{f.relative_to(ROOT)}:{n}: {kind}: {line.strip()[:120]}")
  return hits


def test_label_patterns_match_labels_and_spare_ordinary_words():
  def kinds(*pieces):
    text = "".join(pieces)
    return {k for k, p in LABELS.items() if re.search(p, text)}
  assert kinds("as is", "sue 19 asks") == {"tracker number"}
  assert kinds("by the is", "sue's bar") == {"a tracker item's bar"}
  assert kinds("measured by h", "45") == {"work label (letter and number)"}
  assert kinds("runs/h", "27_digits5") == {"work label (letter and number)"}
  assert kinds("hel", "per h", "52 ran it") >= {"assistant worker"}
  assert kinds("test hel", "pers below") == {"assistant worker"}
  assert kinds("the le", "ad's run") == {"a person leading the work"}
  assert kinds("(le", "ad, updated)") == {"a person leading the work"}
  assert kinds("fl", "ock /tmp/cp", "u.lock nice -n 5") == {"lock-file recipe"}
  assert kinds("Spec: `sha", "red/specs/smile.md`") == {"path outside the project"}
  assert kinds("the fifth ses", "sion") == {"work period"}
  assert kinds("one persistent cache per test ses", "sion") == {"work period"}
  assert kinds("each ow", "ner can run theirs") == {"person who holds a task"}
  assert kinds("done 2026", "-12-04") == {"date of work"}
  assert kinds("see docs/res", "ults/x.md") == {"link to a removed page"}
  for ordinary in ("h0, h1 = render(a), render(b)", "leaves all lead with the member axis", "a lead to follow",
                   "an fcntl.flock on the workdir", "def pytest_sessionfinish(exitstatus):",
                   "jax.sharding shards the batch", "the H100 GPU", "see issues of blackjax", "shared modules"):
    assert kinds(ordinary) == set(), ordinary


def test_no_internal_labels_in_docs_code_configs_or_tests():
  hits = label_hits()
  assert not hits, f"{len(hits)} internal labels:\n" + "\n".join(hits)


if __name__ == "__main__":   # list every hit: python tests/test_docs.py
  print("\n".join(label_hits()))
