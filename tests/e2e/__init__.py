"""The container tier: the rendered Kubernetes objects of a stack, run as podman pods, and driven.

``python3 -m tests.e2e`` (what ``bash tools/e2e.sh`` runs) builds the image from ``images/`` on a
debootstrap'd Debian base, renders a declaration with the library's own builders, turns every
StatefulSet replica into a podman pod (hostname, Service DNS names, ConfigMap / Secret / claim volumes,
init containers, sidecars, preStop hooks) and runs the scenarios of docs/containers.md against it.
"""
