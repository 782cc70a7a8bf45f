"""Data integrity: the shipped manifest matches data/, and a damaged copy stops readers with one line."""

import os
import shutil
import subprocess
import sys

import pytest

from jaxml.data import offline, verify

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _copy(tmp_path, *folders):
  """A partial copy of the shipped root: the manifest plus the named folders."""
  root = tmp_path / "data"
  root.mkdir()
  shutil.copy(verify.default_root() / verify.MANIFEST, root)
  for folder in folders:
    shutil.copytree(verify.default_root() / folder, root / folder)
  return root


def test_shipped_data_matches_its_manifest_and_every_file_is_listed():
  count, problems = verify.verify_root(verify.default_root())
  assert problems == []
  files = [p for p in verify.default_root().rglob("*") if p.is_file() and p.name != verify.MANIFEST]
  assert count == len(files) > 400
  assert max(p.stat().st_size for p in files) < 5 * 2 ** 20


@pytest.mark.parametrize("damage, words", [
    ("truncate", ["is truncated", "expected {size} bytes"]),
    ("alter", ["is altered", "sha256", "({size} bytes)"]),
    ("delete", ["is missing", "expected {size} bytes"]),
])
def test_damaged_file_stops_the_reader_with_one_line(tmp_path, damage, words):
  root = _copy(tmp_path, "uci/energy")
  path = root / "uci" / "energy" / "data.txt"
  size, _ = verify.read_manifest(root)["uci/energy/data.txt"]
  assert path.stat().st_size == size
  offline.load_uci("energy", 0, root=str(root))       # the intact copy reads fine
  if damage == "truncate":
    path.write_bytes(path.read_bytes()[:-100])
  elif damage == "alter":                              # same size, one digit changed
    data = bytearray(path.read_bytes())
    data[10] = ord("7") if data[10] != ord("7") else ord("8")
    path.write_bytes(bytes(data))
  else:
    path.unlink()
  with pytest.raises(offline.DataIntegrityError) as info:
    offline.load_uci("energy", 0, root=str(root))
  message = str(info.value)
  assert "\n" not in message
  assert str(path) in message
  assert all(w.format(size=size) in message for w in words), message
  assert "data/uci/energy/data.txt from a clean clone" in message   # how to restore it
  count, problems = verify.verify_root(root)
  assert any(str(path) in p for p in problems)


def test_restore_hint_for_the_checkout_root_is_git_checkout():
  message = verify._problem(verify.default_root(), "uci/energy/data.txt", 1, "0" * 64)
  assert "git checkout -- data/uci/energy/data.txt" in message and "uci/README.md" in message


def test_root_without_manifest_reads_unchecked(tmp_path):
  root = _copy(tmp_path, "ordinal/machinecpu")
  (root / verify.MANIFEST).unlink()
  assert offline.load_ordinal("machinecpu", root=str(root))["num_classes"] == 10


def test_verify_cli_and_make_target(tmp_path):
  root = _copy(tmp_path, "preferences")
  cmd = [sys.executable, "-m", "jaxml.data.verify", f"--root={root}"]
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
  assert proc.returncode == 1                          # the partial copy misses most files
  assert "is missing" in proc.stderr and "hh_rlhf" not in proc.stderr
  proc = subprocess.run(cmd + ["--write"], cwd=ROOT, capture_output=True, text=True)
  assert proc.returncode == 0 and "(2 files)" in proc.stdout
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
  assert proc.returncode == 0 and proc.stdout.startswith("ok: 2 files")
  (root / "preferences" / "extra.txt").write_text("new\n")
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
  assert proc.returncode == 1 and "extra.txt is not in MANIFEST.sha256" in proc.stderr
  proc = subprocess.run(["make", "-s", "verify-data"], cwd=ROOT, capture_output=True, text=True)
  assert proc.returncode == 0 and proc.stdout.startswith("ok: ")


@pytest.mark.slow
def test_experiment_on_a_corrupted_root_exits_2_and_leaves_no_workdir(tmp_path):
  root = _copy(tmp_path, "ordinal/machinecpu")
  path = root / "ordinal" / "machinecpu" / "chu_10bins.npz"
  path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
  workdir = tmp_path / "run"
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  proc = subprocess.run([sys.executable, "-m", "experiments.sol_ordinal", "--config=configs/sol_ordinal.py:smoke",
                         f"--workdir={workdir}", f"--config.data_dir={root}"],
                        cwd=ROOT, capture_output=True, text=True, env=env, timeout=240)
  assert proc.returncode == 2, proc.stderr[-2000:]
  errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and str(path) in errors[0] and "truncated" in errors[0]
  assert not workdir.exists()
