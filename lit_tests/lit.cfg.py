"""lit configuration: every .mlir file under lit_tests/ is a test; RUN lines use
cuir-opt, cuir-run and filecheck from the environment the tests run in."""

import os

import lit.formats

config.name = "CuBridge"
config.test_format = lit.formats.ShTest()
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["inputs"]
config.environment["PYTHONUNBUFFERED"] = "1"
for name in ("PATH", "HOME", "PYTHONPATH"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
config.substitutions.append(("%examples", os.path.join(config.test_source_root, "..", "examples")))
