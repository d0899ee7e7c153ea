"""`pip install --no-build-isolation .`: CMake builds the extension dsc._dsc and the dsc program, and
setuptools packs them with the pure-Python package python/dsc/ into one wheel. Nothing beyond Debian's
python3-setuptools and python3-wheel is needed, so it works without a package index.

The version has one source, CMakeLists.txt's project(dsc VERSION ...). Extra CMake options come from
the CMAKE_ARGS environment variable (e.g. CMAKE_ARGS="-DDSC_WITH_CUDA=OFF").
"""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
# One level below the checkout, like the usual build/: with ccache's base_dir the relative source paths
# then match other build trees of the same depth, and so do the cache entries.
CMAKE_BUILD = "build-pip"


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"project\(\s*dsc\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", text)
    if not m:
        raise RuntimeError("CMakeLists.txt has no project(dsc VERSION x.y.z)")
    return m.group(1)


class CMakeBuild(build_ext):
    """Configures and builds only the two targets the wheel holds: dsc_python (_dsc*.so) and dsc."""

    def build_extension(self, ext):
        build = ROOT / CMAKE_BUILD
        extra = shlex.split(os.environ.get("CMAKE_ARGS", ""))
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                     "-DDSC_BUILD_TESTS=OFF",
                     # The extension is for the interpreter running pip (a venv's python included).
                     f"-DPython3_EXECUTABLE={sys.executable}"]
        if not (build / "CMakeCache.txt").exists() and shutil.which("ninja") and \
                not any(a.startswith("-G") for a in extra):
            configure += ["-G", "Ninja"]
        if shutil.which("ccache") and not any("COMPILER_LAUNCHER" in a for a in extra):
            configure += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
        subprocess.run(configure + extra, check=True)

        cache = (build / "CMakeCache.txt").read_text()
        if "DSC_PYTHON_DIR:INTERNAL=" not in cache:
            sys.exit("dsc: CMake did not configure the Python module (python3-dev or pybind11-dev missing? "
                     "see scripts/install-deps.sh)")
        jobs = self.parallel or os.cpu_count() or 1
        subprocess.run(["cmake", "--build", str(build), "--target", "dsc_python", "dsc", "-j", str(jobs)],
                       check=True)

        built = sorted((build / "python" / "dsc").glob("_dsc*.so"), key=lambda p: p.stat().st_mtime)
        if not built:
            sys.exit(f"dsc: no _dsc*.so under {build / 'python' / 'dsc'} after the build")
        dest = pathlib.Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[-1], dest)


setup(
    version=project_version(),
    packages=["dsc"],
    package_dir={"dsc": "python/dsc"},
    package_data={"dsc": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("dsc._dsc", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # The dsc program goes to the environment's bin/ (a venv's, or /usr/local/bin for a system install).
    # install_data runs after build_ext has built it.
    data_files=[("bin", [f"{CMAKE_BUILD}/dsc"])],
    # setuptools' own staging stays out of build/, which is usually a developer's CMake tree.
    options={"build": {"build_base": f"{CMAKE_BUILD}/setuptools"}},
    zip_safe=False,
)
