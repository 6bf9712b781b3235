"""The targets this library deploys to: ``cloud`` value -> the module holding that target's descriptor.

Adding a target is one package, ``slonk_infra/clouds/<cloud>/``, whose ``target`` module holds a
``TARGET`` (:class:`~slonk_infra.clouds.target.CloudTarget`) and whose deployer component it names,
and one line here. ``tests/clouds/test_targets.py`` fails until the declaration and the catalog know
the new ``cloud`` value and the descriptor provides everything it must.
"""

from __future__ import annotations

import importlib
import importlib.util

from slonk_infra.clouds.target import CloudTarget

TARGETS: dict[str, str] = {
    "gcp": "slonk_infra.clouds.gcp.target",
    "aws": "slonk_infra.clouds.aws.target",
    "local": "slonk_infra.clouds.local.target",
}


def target(cloud: str) -> CloudTarget:
    """The descriptor of target ``cloud`` (raises ValueError naming the known targets)."""
    if cloud not in TARGETS:
        raise ValueError(f"no target for cloud {cloud!r}; known: {', '.join(TARGETS)}")
    found = importlib.import_module(TARGETS[cloud]).TARGET
    if not isinstance(found, CloudTarget) or found.cloud != cloud:
        raise TypeError(f"{TARGETS[cloud]}.TARGET is not the CloudTarget of {cloud!r}")
    return found


def targets() -> dict[str, CloudTarget]:
    """Every registered target's descriptor, by ``cloud`` value, in registry order."""
    return {cloud: target(cloud) for cloud in TARGETS}


class MissingExtraError(RuntimeError):
    """A stack's cloud needs a provider SDK that is not installed (one optional extra per cloud)."""


def require_sdk(cloud: str) -> None:
    """Raise :class:`MissingExtraError` with the install line when ``cloud``'s provider SDK is missing.

    Checked before the deployer is imported, so a one-cloud install gets one sentence, not an ImportError
    from deep inside the adapter.
    """
    found = target(cloud)
    missing = [m for m in found.sdk_modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(
            f"cloud: {cloud} needs {', '.join(missing)}, which is not installed; install the {found.extra!r} "
            f"extra: pip install -c constraints.txt '.[{found.extra}]' in a checkout of slonk-infra (or bash tools/venv.sh)"
        )
