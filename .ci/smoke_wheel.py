"""The wheel as a user meets it, in a clean virtual environment and from a folder outside the sources: the
wheel installed as the README's first command says (``pip install "vijax-toolkit[extras]"``, the wheel for
the name), ``import vijax`` from site-packages at the expected version, the README's first Python example
run as written (tests/test_readme.py checks its numbers), ``vijax --version`` and ``vijax list``. The
release workflow runs it with the environment's python:

    python .ci/smoke_wheel.py WHEEL README.md VERSION
"""

import pathlib
import re
import subprocess
import sys


def _run(*args):
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def main(wheel, readme, version):
    text = pathlib.Path(readme).read_text()
    install = re.search(r"```bash\n\s*pip install \"?vijax-toolkit(\[[\w,]+\])?\"?\s*\n", text)
    assert install, "the README's first bash block is no longer `pip install vijax-toolkit[...]`"
    _run(sys.executable, "-m", "pip", "install", "-q", f"{pathlib.Path(wheel).resolve()}{install.group(1) or ''}")
    where = _run(sys.executable, "-c", "import vijax; print(vijax.__file__, vijax.__version__)").split()
    assert "site-packages" in where[0] and where[1] == version, where
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    _run(sys.executable, "-c", example)
    command = str(pathlib.Path(sys.executable).parent / "vijax")
    assert _run(command, "--version").split() == ["vijax", version]
    assert "gmm_simulation" in _run(command, "list")
    print(f"vijax {version}: installed{install.group(1) or ''}; README example, --version and list ok")


if __name__ == "__main__":
    main(*sys.argv[1:])
