"""Runs unmodified PyTorch scripts on oar.

    python -m oar.mock script.py [args...]      runs script.py with `import torch` giving oar
    export PYTHONPATH=$(python -m oar.mock --path)${PYTHONPATH:+:$PYTHONPATH}
                                                 the same for every python started from this shell
"""
import os
import runpy
import sys


def shim_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_mock_path")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    if argv[0] == "--path":
        print(shim_path())
        return 0
    import oar

    oar.mock_torch(enable=True)
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
