"""The slonk-infra component provider: Pulumi runs ``python <this folder> <engine address> [flags]``.

It serves the schema of :mod:`provider` (the same as ``schema.json``) and constructs the components
for programs in other languages. Nothing here runs when the folder is imported.
"""

from typing import TYPE_CHECKING

from pulumi.provider.experimental import component_provider_host

if TYPE_CHECKING:
    # The type checker reads this folder from the repository root, where the sibling is components.provider.
    from components.provider import COMPONENTS, PACKAGE, version
else:
    # Pulumi runs the folder as a script, which puts the folder itself first on the path.
    from provider import COMPONENTS, PACKAGE, version

if __name__ == "__main__":
    component_provider_host(COMPONENTS, PACKAGE, version=version())
