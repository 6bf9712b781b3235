"""Topology: topology.conf (tree or block) or topology.yaml (named topologies, Slurm 25.05+).

Each worker group (a pool, which on the clouds is one compact-placement node pool or placement
group, or one TPU slice) is a leaf switch under one root in the tree; in block form each group, or
each NVLink domain of rack-scale machines, is a block. Scaling a group never moves a node between
switches: the node set of every switch is fixed by the group's node records.
"""

from __future__ import annotations

import yaml

from slonk_infra.plan import ClusterPlan, naming
from slonk_infra.slurm.lines import header, kv_line

FABRIC = "fabric"
BLOCKS = "blocks"


def tree_switches(plan: ClusterPlan) -> list[tuple[str, str | None, str | None]]:
    """(switch, child switches, nodes) for the tree: one leaf per group under the root."""
    leaves = [(naming.switch(g.name), None, g.hostlist) for g in plan.groups]
    root = (naming.ROOT_SWITCH, ",".join(name for name, _, _ in leaves), None)
    return [*leaves, root]


def blocks(plan: ClusterPlan) -> list[tuple[str, str]]:
    """(block, nodes): TPU slices and NVLink domains, and otherwise each group."""
    out = []
    for g in plan.groups:
        domains = g.nvlink_domains if g.machine.nvlink_domain > 1 else [g.node_names]
        out += [(naming.block(g.name, i), naming.compress(d)) for i, d in enumerate(domains)]
    return out


def render_topology_conf(plan: ClusterPlan) -> str:
    """topology.conf for topology/tree or topology/block."""
    if plan.declaration.slurm.topology == "block":
        lines = [kv_line([("BlockName", b), ("Nodes", n)]) for b, n in blocks(plan)]
    else:
        lines = [kv_line([("SwitchName", s), ("Switches", c), ("Nodes", n)]) for s, c, n in tree_switches(plan)]
    return header("topology.conf", plan.name) + "\n".join(lines) + "\n"


def render_topology_yaml(plan: ClusterPlan) -> str:
    """topology.yaml: the fabric tree as the default, and a block topology the TPU partitions select."""
    switches = []
    for name, children, nodes in tree_switches(plan):
        entry: dict[str, str] = {"switch": name}
        if children:
            entry["children"] = children
        if nodes:
            entry["nodes"] = nodes
        switches.append(entry)
    doc: list[dict[str, object]] = [{"topology": FABRIC, "cluster_default": True, "tree": {"switches": switches}}]
    # Every group is a block too (a slice, an NVLink domain, a compact-placement pool): a node outside
    # every block draws a warning from slurmctld at each start. Only TPU partitions select this topology.
    all_blocks = blocks(plan)
    if any(g.kind == "tpu" for g in plan.groups):
        doc.append(
            {
                "topology": BLOCKS,
                "cluster_default": False,
                "block": {"blocks": [{"block": b, "nodes": n} for b, n in all_blocks]},
            }
        )
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
    return header("topology.yaml", plan.name) + "---\n" + body
