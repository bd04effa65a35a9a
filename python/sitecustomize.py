"""Lets a Ringmaster worker read a rank's Python stacks without the script's
help, when its job hangs or `ringmaster stacks` asks: on the real-time
signal SIGRTMIN+5, faulthandler writes every thread's stack to the file
RINGMASTER_STACKS_FILE names. And a rank ended by an exception nothing
caught leaves it in TORCHELASTIC_ERROR_FILE, as torchrun's @record does
(unless @record wrote it already), so that the job's root cause is
"ValueError: bad input" for any Python rank. The worker puts this
directory on the rank's PYTHONPATH; the sitecustomize module it stands in
front of, if any, still runs.
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


def _record_uncaught():
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    import sys
    previous = sys.excepthook

    def record(kind, error, trace):
        try:
            if not os.path.exists(path):  # @record's own account stands
                import json
                import time
                import traceback
                data = {"message": {
                    "message": f"{kind.__name__}: {error}",
                    "extraInfo": {
                        "py_callstack": "".join(traceback.format_exception(kind, error, trace)),
                        "timestamp": str(int(time.time())),
                    },
                }}
                with open(path, "w") as f:
                    json.dump(data, f)
        except Exception:  # noqa: BLE001 (the exception itself is still shown below)
            pass
        previous(kind, error, trace)

    sys.excepthook = record


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
_record_uncaught()
_chain()
