"""Build the optional compiled hot loops of page text and dedupe (crawl/text/_compiled.c).

Everything else is in pyproject.toml. ``optional=True``: where no C compiler
is found the install still succeeds, and crawl/text/extract.py and
crawl/dedupe/simhash.py fall back to their Python and numpy paths, which
compute the same text and fingerprints more slowly.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("crawl.text._compiled", ["crawl/text/_compiled.c"], optional=True,
                             extra_compile_args=["-O3"])])
