"""One version: CMakeLists.txt's project(dsc VERSION ...) is what the dsc program prints and what
setup.py gives pip, whether dsc runs from a build tree (ctest) or from `pip install .`."""
import os
import pathlib
import re
import subprocess
import sys

import dsc


def project_version():
    text = (pathlib.Path(os.environ["DSC_SOURCE_DIR"]) / "CMakeLists.txt").read_text()
    return re.search(r"project\(\s*dsc\s+VERSION\s+([0-9.]+)", text).group(1)


def test_the_program_prints_the_project_version(dsc_binary):
    out = subprocess.run([dsc_binary, "--version"], check=True, capture_output=True, text=True).stdout
    assert out.split()[:2] == ["dsc", project_version()], out


def test_setup_py_reads_the_project_version():
    r = subprocess.run([sys.executable, "setup.py", "--version"], cwd=os.environ["DSC_SOURCE_DIR"],
                       check=True, capture_output=True, text=True)
    assert r.stdout.strip().splitlines()[-1] == project_version(), r.stdout + r.stderr


def test_the_module_reports_the_project_version():
    assert dsc.__version__ == project_version()
