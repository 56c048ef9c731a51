"""Only what pyproject.toml cannot say: rules/ and schemas/ ship as packages of buildgen.

They live at the top of the repository (DESIGN.md's layout) and are mapped to
buildgen._rules and buildgen._schemas by [tool.setuptools.package-dir]; package discovery
does not follow such mappings, so they are listed here.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["buildgen", "buildgen.*"])
    + ["buildgen._rules", "buildgen._schemas", "buildgen._schemas.targets"],
)
