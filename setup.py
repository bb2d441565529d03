"""The project is configured in pyproject.toml; this file adds one build step: the experiment configs
of the repository's ``configs/`` folder are copied into the wheel as package data
(``vijax/run/configs/*.yaml``), so ``vijax run gmm_simulation`` works from an installed wheel. In a
checkout the ``vijax`` command reads ``configs/`` itself (``vijax.run.shipped_config_dir``)."""

import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = pathlib.Path(__file__).resolve().parent


class BuildPyWithConfigs(build_py):
    def run(self):
        # an in-tree build (`pip wheel .`) reuses build/lib: start it empty, so that a module removed
        # from the source since the last build is not shipped
        shutil.rmtree(pathlib.Path(self.build_lib) / "vijax", ignore_errors=True)
        super().run()
        source = ROOT / "configs"
        if not source.is_dir():  # a build from an sdist made without them: nothing to copy
            return
        target = pathlib.Path(self.build_lib) / "vijax" / "run" / "configs"
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(source.glob("*.yaml")):
            shutil.copy2(path, target / path.name)


setup(cmdclass={"build_py": BuildPyWithConfigs})
