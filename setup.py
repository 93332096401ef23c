"""Build the optional compiled hot loop of crawl dedupe (crawl/_dedupe.c).

Everything else is in pyproject.toml. ``optional=True``: where no C compiler
is found the install still succeeds and crawl/simhash.py falls back to its
numpy path, which computes the same fingerprints more slowly.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("crawl._dedupe", ["crawl/_dedupe.c"], optional=True,
                             extra_compile_args=["-O3"])])
