"""Packages for setuptools (the rest of the build is in pyproject.toml): kafkalike's own, plus the
protocol spec files from the top-level protocol_specs/ installed inside the package, where
kafkalike.protocol.spec looks first (a checkout reads them where they are)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["kafkalike", "kafkalike.*"]), "kafkalike.protocol_specs"],
    package_dir={"kafkalike.protocol_specs": "protocol_specs"},
)
