"""Every shell script in the tree passes shellcheck at warning level. The GPU scripts
(scripts/gpu_*.sh) run only on a lent GPU, minutes at a time, where an unquoted variable or a
masked exit status costs the run; the rest run in CI and by hand. The GPU runs' own scripts under
docs/perf/gpu-runs/ are records, kept as they ran."""
import shutil
import subprocess

from conftest import ROOT


def test_shell_scripts_pass_shellcheck():
    assert shutil.which("shellcheck"), "shellcheck is missing: run scripts/setup.sh"
    files = subprocess.run(["git", "ls-files", "*.sh", ".ci/run"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    scripts = [f for f in files if not f.startswith("docs/perf/gpu-runs/")]
    assert "scripts/gpu_session.sh" in scripts and ".ci/run" in scripts, scripts
    proc = subprocess.run(["shellcheck", "--severity=warning", *scripts], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
