"""Build hook for the one compiled module (everything else is in pyproject.toml).

``optional=True``: a machine without a C compiler still installs; the store then runs on the
identical pure-Python twin (broker_core/store/codec/hot_py.py).
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("broker_core.store.codec._hotpath", ["broker_core/store/codec/_hotpath.c"],
              extra_compile_args=["-O2"], optional=True),
])
