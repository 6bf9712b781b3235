"""The harnesses the tests and benchmarks run the library's output on: importable programs, not tests.

* :mod:`testing.slurmlab`: real slurmctld / slurmd on this machine, started from rendered Slurm files.
* :mod:`testing.e2e`: the rendered Kubernetes objects of a stack as podman pods (``python -m testing.e2e``).
* :mod:`testing.fakekube`: a fake Kubernetes API server for the operations controller.
* :mod:`testing.nvml`: an NVML stand-in (``libnvidia-ml.so.1`` in C) that answers like a recorded GPU node,
  faults planted per GPU, for the container tier's GPU nodes.

pytest does not collect this package (``testpaths`` is ``tests``); the harnesses' own checks live in
``tests/``. See README.md here.
"""
