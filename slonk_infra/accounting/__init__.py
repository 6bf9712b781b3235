"""The accounting reconciler: what slurmdbd should hold, what it holds, the sacctmgr commands between them,
and the process that runs them.

- :mod:`~slonk_infra.accounting.records`: QOS, associations and users as plain records; a :class:`State`.
- :mod:`~slonk_infra.accounting.sacctmgr`: the ``sacctmgr -P -n show ...`` commands and the parser of their
  output into a :class:`State`.
- :mod:`~slonk_infra.accounting.desired`: the :class:`State` a declaration's ``slurm.accounting`` asks for.
- :mod:`~slonk_infra.accounting.reconcile`: the ordered ``sacctmgr -i`` commands from one to the other, the
  drift (what slurmdbd holds that the declaration lacks) and what running jobs hold back.
- :mod:`~slonk_infra.accounting.wire`: the desired :class:`State` as stable JSON (the render's ConfigMap key
  ``desired.json``) and back.
- :mod:`~slonk_infra.accounting.runner` and ``python3 -m slonk_infra.accounting``: the process beside
  slurmdbd that reads ``desired.json``, runs the listings and the plan, reports drift and held deletions, and
  with ``--interval`` does it again, re-reading the file each time.

Only :mod:`~slonk_infra.accounting.desired` reads the declaration, so the rest runs in a pod without it
(docs/accounting.md, *The reconciler*).
"""
