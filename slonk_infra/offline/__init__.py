"""The offline family: the Pulumi program run in-process under the mock runtime, with no cloud.

- :mod:`.runner`: runs a program under Pulumi's public test API and records every registration;
- :mod:`.fake_clouds`: what the fake clouds answer for resources and invokes (one table);
- :mod:`.render`: ``slonk-infra render`` and ``check``'s front half: run a stack, write its files;
- :mod:`.readiness`: ``slonk-infra status``'s reading of a deployed cluster (read-only Kubernetes API
  calls, no Pulumi): the other thing the CLI does on the user's machine besides running the program.

It is the top of the library beside the CLI and the policy runner; nothing below imports it.
"""
