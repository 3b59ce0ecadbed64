"""Fetch llama.cpp as vendored in the PyPI sdist of llama-cpp-python, checked by sha256.

Usage: fetch-llama-cpp.py VERSION [SHA256] DEST
With no SHA256 (an empty argument), the pinned digest below must be for VERSION.
The sdist comes through pip (`pip download --no-binary :all:`), never from a hard-coded
index URL; pip needs scikit-build-core and cmake to read the sdist's metadata.
"""
import glob
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

PINNED = {"0.3.36": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"}


def main(version: str, sha256: str, dest: str) -> None:
    want = sha256 or PINNED.get(version)
    if not want:
        sys.exit(f"fetch-llama-cpp: no sha256 given and none pinned for llama-cpp-python {version}")
    name = f"llama_cpp_python-{version}.tar.gz"
    with tempfile.TemporaryDirectory() as tmp:
        pip = [sys.executable, "-m", "pip"]
        subprocess.run(pip + ["install", "--quiet", "scikit-build-core", "cmake"], check=True)
        subprocess.run(
            pip + ["download", "--quiet", "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
                   "-d", tmp, f"llama-cpp-python=={version}"],
            check=True,
        )
        found = glob.glob(f"{tmp}/{name}")
        if not found:
            sys.exit(f"fetch-llama-cpp: pip did not fetch {name}")
        data = open(found[0], "rb").read()
        got = hashlib.sha256(data).hexdigest()
        if got != want:
            sys.exit(f"fetch-llama-cpp: {name}: sha256 {got}, expected {want}")
        prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
        with tarfile.open(found[0]) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
            for m in members:
                m.name = m.name[len(prefix):]
            tar.extractall(dest, members=[m for m in members if m.name], filter="data")
    shutil.rmtree(f"{dest}/build", ignore_errors=True)
    print(f"llama.cpp from {name} (sha256 {got}) in {dest}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3])
