"""The optional compiled hot path (Cython): the row decoder (``binlake.values._fastrows`` and
``_fastjson``), the per-event envelope (``binlake.events._fastenv``, with its own CRC32), the
merge's node reader loop (``binlake.globalbinlog._fastnodes``), the row text formatter
(``binlake.render._fastrender``), the JSON and SQL row formatters (``binlake.render._fastjoin``) and the
change log's VARIANT images (``binlake.arrowlog._fastvariant``).

Everything else is in pyproject.toml. Without Cython or a C compiler the package installs and runs
pure Python (the reference path): the extension is optional and a failed build is only a warning.
"""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # no Cython (an install without build isolation): the pure path only
    extensions = []
else:
    extensions = cythonize(
        [
            *(
                Extension(f"binlake.values.{name}", [f"src/binlake/values/{name}.pyx"], optional=True)
                for name in ("_fastrows", "_fastjson")
            ),
            *(
                Extension(f"binlake.render.{name}", [f"src/binlake/render/{name}.pyx"], optional=True)
                for name in ("_fastrender", "_fastjoin")
            ),
            Extension("binlake.events._fastenv", ["src/binlake/events/_fastenv.pyx"], optional=True),
            Extension(
                "binlake.globalbinlog._fastnodes", ["src/binlake/globalbinlog/_fastnodes.pyx"], optional=True
            ),
            Extension(
                "binlake.arrowlog._fastvariant", ["src/binlake/arrowlog/_fastvariant.pyx"], optional=True
            ),
        ],
        compiler_directives={"language_level": "3"},
        include_path=["src"],  # the shared .pxd (binlake.values._bytes)
        quiet=True,
    )
    for ext in extensions:  # cythonize makes new Extensions without it: a failed compile only warns
        ext.optional = True

setup(ext_modules=extensions)
