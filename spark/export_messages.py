"""spark-submit entry point of exportMessages: ``spark-submit spark/export_messages.py --store DIR ...``.

Same options and output as ``mqadmin exportMessages`` (see :mod:`spark.search_cli` for the options and
exit status). Run it with the venv's interpreter, e.g. ``PYSPARK_PYTHON=.venv/bin/python
PYSPARK_DRIVER_PYTHON=.venv/bin/python .venv/lib/python3.11/site-packages/pyspark/bin/spark-submit
spark/export_messages.py --store DIR``.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # Run as a script (spark-submit): import the ``spark`` package from the repo root, not this dir.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))
    from spark.search_cli import EXPORT, script_main

    script_main(EXPORT)
