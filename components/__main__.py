"""The slonk-infra component provider: Pulumi runs ``python <this folder> <engine address> [flags]``.

It serves the schema of :mod:`provider` (the same as ``schema.json``) and constructs the components
for programs in other languages. Nothing here runs when the folder is imported.
"""

from provider import COMPONENTS, PACKAGE, version
from pulumi.provider.experimental import component_provider_host

if __name__ == "__main__":
    component_provider_host(COMPONENTS, PACKAGE, version=version())
