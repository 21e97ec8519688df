"""Failure injection for test_geodml_flower_failures.py, loaded by every Python process started
with this folder first on PYTHONPATH (the CLI and the Ray workers that run the ClientApps): when
GEODML_INJECT is set (raise, exit or hang), data center GEODML_INJECT_DC's DCWorker fails from
its GEODML_INJECT_CALL-th computation on: raises RuntimeError, ends its process (os._exit, as a
crash or the OOM killer would) or sleeps for an hour. Nothing is imported until geodml.dcside
is, so Ray's other processes are left alone."""

import importlib.abc
import importlib.util
import os
import sys
import time

_METHODS = ("loss_grad", "local_train", "local_train_down", "solve_local", "fadl_solve", "line_losses")


def _patch(cls) -> None:
    dc, at, how = int(os.environ["GEODML_INJECT_DC"]), int(os.environ["GEODML_INJECT_CALL"]), os.environ["GEODML_INJECT"]
    calls = [0]
    for name in _METHODS:
        orig = getattr(cls, name)

        def wrapped(self, *args, _orig=orig, **kwargs):
            if self.index == dc:
                calls[0] += 1
                if calls[0] >= at:
                    if how == "exit":
                        os._exit(1)
                    if how == "hang":
                        time.sleep(3600)
                    raise RuntimeError(f"injected failure in data center {dc}")
            return _orig(self, *args, **kwargs)

        setattr(cls, name, wrapped)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "geodml.dcside":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module.DCWorker)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("GEODML_INJECT"):
    sys.meta_path.insert(0, _Finder())
