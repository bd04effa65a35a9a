"""The package's build backend: Debian's setuptools (and, for wheels, its
wheel), found where Debian installs them, so that `pip install ./python`
needs no index. pip builds in an environment of its own that does not see
the system's packages; this adds their directory to it."""
import sys

sys.path.append("/usr/lib/python3/dist-packages")

from setuptools.build_meta import *  # noqa: E402,F401,F403


def get_requires_for_build_wheel(config_settings=None):
    # setuptools would ask for `wheel` from the index; Debian's is on the path.
    return []
