"""The installed wheel as a user meets it, from a folder outside the sources: ``import vijax`` comes from
site-packages, the README's Python example runs and finds its two clusters, ``vijax --version`` prints the
expected version and ``vijax list`` lists the shipped experiments. The release workflow runs it in a clean
virtual environment with the wheel alone installed (no extras):

    python .ci/smoke_wheel.py README.md VERSION
"""

import pathlib
import re
import shutil
import subprocess
import sys


def main(readme, version):
    import numpy as np

    import vijax

    assert "site-packages" in vijax.__file__, f"vijax imported from {vijax.__file__}, not the installed wheel"
    assert vijax.__version__ == version, (vijax.__version__, version)
    block = re.search(r"```python\n(.*?)```", pathlib.Path(readme).read_text(), re.S).group(1)
    scope = {}
    exec(compile(block, "README.md", "exec"), scope)
    w = np.sort(np.asarray(scope["weights"]))
    assert abs(w[-1] - 0.5) < 0.05 and abs(w[-2] - 0.5) < 0.05, w  # two clusters of 500 points each
    command = shutil.which("vijax", path=str(pathlib.Path(sys.executable).parent))
    out = subprocess.run([command, "--version"], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["vijax", version], out
    listed = subprocess.run([command, "list"], capture_output=True, text=True, check=True).stdout
    assert "gmm_simulation" in listed, listed
    print(f"vijax {version}: README example, --version and list ok")


if __name__ == "__main__":
    main(*sys.argv[1:])
