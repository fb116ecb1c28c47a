"""The parts of the build pyproject.toml cannot express: kafkalike's packages plus the protocol spec
files from the top-level protocol_specs/, installed inside the package (where
kafkalike.protocol.spec looks first; a checkout reads them where they are), and the compiled
record walk of the produce path (kafkalike/protocol/record_walk.py). The extension is optional:
without a C compiler the install still succeeds and the pure-Python walk is used (scripts/test
makes that a failure, KAFKALIKE_REQUIRE_NATIVE=1)."""

from setuptools import Extension, find_packages, setup

setup(
    packages=[*find_packages(include=["kafkalike", "kafkalike.*"]), "kafkalike.protocol_specs"],
    package_dir={"kafkalike.protocol_specs": "protocol_specs"},
    ext_modules=[
        Extension("kafkalike.protocol._recordwalk", ["kafkalike/protocol/_recordwalk.c"], optional=True),
    ],
)
