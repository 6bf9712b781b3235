"""The accounting reconciler's pure core: what slurmdbd should hold, what it holds, and the sacctmgr commands
between them.

- :mod:`~slonk_infra.accounting.records`: QOS, associations and users as plain records; a :class:`State`.
- :mod:`~slonk_infra.accounting.sacctmgr`: the ``sacctmgr -P -n show ...`` commands and the parser of their
  output into a :class:`State`.
- :mod:`~slonk_infra.accounting.desired`: the :class:`State` a declaration's ``slurm.accounting`` asks for.
- :mod:`~slonk_infra.accounting.reconcile`: the ordered ``sacctmgr -i`` commands from one to the other, the
  drift (what slurmdbd holds that the declaration lacks) and what running jobs hold back.

Nothing here runs a command; the process that will (a Job beside slurmdbd) is not built yet (docs/accounting.md).
Only :mod:`~slonk_infra.accounting.desired` reads the declaration, so the rest can run in a pod without it.
"""
