"""Lets a Ringmaster worker read a rank's Python stacks without the script's
help, when its job hangs or `ringmaster stacks` asks: on the real-time
signal SIGRTMIN+5, faulthandler writes every thread's stack to the file
RINGMASTER_STACKS_FILE names. The worker puts this directory on the rank's
PYTHONPATH; the sitecustomize module it stands in front of, if any, still
runs.
"""
import os


def _watch():
    path = os.environ.get("RINGMASTER_STACKS_FILE")
    if not path:
        return
    try:
        import faulthandler
        import signal
        stacks = open(path, "a")  # open for the life of the process, as faulthandler needs
        faulthandler.register(signal.SIGRTMIN + 5, file=stacks, all_threads=True, chain=False)
        globals()["_stacks"] = stacks
    except (OSError, ValueError, AttributeError, RuntimeError):
        pass  # no stacks for this process; nothing else changes


def _chain():
    import importlib.machinery
    import importlib.util
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin is None:
        return
    if os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_watch()
_chain()
