"""Rewrites rendered Slurm config files into a config a localhost lab can run.

Only the keys listed in :data:`OVERRIDES` are touched; every other line is
copied byte for byte, so the lab runs what would be deployed.  The module is
pure (no processes, no file system) so the rewriting itself is cheap to test.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import hostlist

from slonk_infra.policy import slurmconf

__all__ = [
    "OVERRIDES",
    "ConfigError",
    "FakeDevice",
    "LabContext",
    "Override",
    "RenderedLab",
    "parse_node_names",
    "render_lab_config",
]


class ConfigError(ValueError):
    """The rendered files cannot be turned into a lab config (e.g. a missing prolog)."""


@dataclass(frozen=True)
class Override:
    """One documented localhost override: which file and key, what it becomes, and why."""

    file: str
    key: str
    becomes: str
    why: str


# The complete list of changes applied to rendered files.  README.md repeats it
# and the selfcheck asserts that it does, so the two cannot drift apart.
# ``<W>`` is the lab's work directory as the daemons see it.
OVERRIDES: tuple[Override, ...] = (
    Override(
        "slurm.conf",
        "SlurmctldHost",
        "<short hostname>(127.0.0.1); further SlurmctldHost lines and "
        "SlurmctldAddr, ControlMachine, ControlAddr, BackupController, BackupAddr are dropped",
        "the deployed value is a Kubernetes service/pod DNS name; HA backups do not exist here",
    ),
    Override("slurm.conf", "SlurmctldPort", "a free port", "other Slurm instances may share the host"),
    Override("slurm.conf", "SlurmdPort", "a free port", "other Slurm instances may share the host"),
    Override(
        "slurm.conf",
        "NodeName",
        "each line is split into one line per node, with NodeAddr=127.0.0.1 "
        "NodeHostname=<short hostname> Port=<free port per node> (deployed "
        "NodeAddr/NodeHostname/Port/BcastAddr dropped); NodeName=DEFAULT lines unchanged",
        "all slurmd run on one host (slurmd -N <name>), each needs its own port",
    ),
    Override(
        "slurm.conf",
        "SlurmdParameters",
        "config_overrides added to the list",
        "the rendered CPUs/RealMemory/sockets describe real GPU nodes, not this host; "
        "without it every node registers as INVAL/DRAIN",
    ),
    Override("slurm.conf", "StateSaveLocation", "<W>/state", "private temp dir"),
    Override("slurm.conf", "SlurmdSpoolDir", "<W>/spool/%n", "private temp dir, one per node"),
    Override("slurm.conf", "SlurmctldPidFile", "<W>/run/slurmctld.pid", "private temp dir"),
    Override("slurm.conf", "SlurmdPidFile", "<W>/run/slurmd-%n.pid", "private temp dir, one per node"),
    Override("slurm.conf", "SlurmctldLogFile", "<W>/log/slurmctld.log", "private temp dir"),
    Override("slurm.conf", "SlurmdLogFile", "<W>/log/slurmd-%n.log", "private temp dir, one per node"),
    Override("slurm.conf", "SlurmSchedLogFile", "<W>/log/sched.log (only if set)", "private temp dir"),
    Override("slurm.conf", "SlurmUser", "root", "the lab runs as root; no slurm user is needed"),
    Override("slurm.conf", "SlurmdUser", "root", "the lab runs as root"),
    Override(
        "slurm.conf",
        "AuthInfo",
        "socket=<lab munge socket> when munge is used; keyfile=<W>/etc/slurm.key when given with "
        "auth/slurm (other comma items kept); with auth/slurm or cred/slurm a key is generated at "
        "<W>/etc/slurm.key (the default location next to slurm.conf)",
        "the lab's own munged; the deployed slurm.key is a Kubernetes secret",
    ),
    Override(
        "slurm.conf",
        "AuthAltParameters",
        "jwt_key=<W>/etc/jwt_hs256.key, a generated key (other items kept); if AuthAltTypes "
        "has auth/jwt and no jwt_key, a key is generated at the default <W>/state/jwt_hs256.key",
        "the deployed key is a Kubernetes secret",
    ),
    Override("slurm.conf", "ProctrackType", "proctrack/linuxproc", "no delegated cgroup tree here"),
    Override("slurm.conf", "TaskPlugin", "task/none", "no delegated cgroup tree here"),
    Override(
        "slurm.conf",
        "JobAcctGatherType",
        "jobacct_gather/linux (only when it was jobacct_gather/cgroup)",
        "no delegated cgroup tree here",
    ),
    Override(
        "slurm.conf",
        "Prolog, Epilog, PrologSlurmctld, EpilogSlurmctld, TaskProlog, TaskEpilog, SrunProlog, SrunEpilog",
        "<W>/etc/<file> copies of the given files (matched by trailing path components; globs kept); "
        "a path not among the given files is an error",
        "scripts are installed at image paths that do not exist here",
    ),
    Override(
        "slurm.conf",
        "Include, ResumeProgram, SuspendProgram, ResumeFailProgram, RebootProgram, HealthCheckProgram, PlugStackConfig",
        "<W>/etc/<file> when the file is among the given files, else unchanged",
        "files are installed at image paths that do not exist here",
    ),
    Override(
        "gres.conf",
        "File",
        "fake character devices <W>/dev/<name> (mknod c 195 N, N = trailing digits)",
        "slurmd only stats them; missing files make slurmd wait forever, file-less GPUs are dropped",
    ),
    Override("gres.conf", "AutoDetect", "off", "there is no NVML/GPU on the test host"),
    Override(
        "gres.conf",
        "gpu_files_per_node (SlurmLab argument)",
        "appends NodeName=<n> Name=gpu [Type=<from Gres=>] File=<fake devices>; "
        "count-only Name=gpu lines for those nodes are dropped",
        "for configs that rely on AutoDetect, so their GPUs exist in the lab",
    ),
    Override(
        "cgroup.conf",
        "CgroupPlugin",
        "host flavor (22.05): autodetect; chroot flavor (26.05): disabled; "
        "cgroup.conf is created with only this line if absent",
        "cgroup/v2 is fatal on a v1/hybrid host (slurmd always loads the cgroup plugin); "
        "the chroot has no cgroup fs mounted",
    ),
)

_CONTROLLER_DROP = {"slurmctldaddr", "controlmachine", "controladdr", "backupcontroller", "backupaddr"}
_NODE_DROP = {"nodeaddr", "nodehostname", "port", "bcastaddr"}
_REQUIRED_SCRIPTS = {
    "prolog",
    "epilog",
    "prologslurmctld",
    "epilogslurmctld",
    "taskprolog",
    "taskepilog",
    "srunprolog",
    "srunepilog",
}
_OPTIONAL_FILES = {
    "resumeprogram",
    "suspendprogram",
    "resumefailprogram",
    "rebootprogram",
    "healthcheckprogram",
    "plugstackconfig",
}
# Executables among the given files need the x bit in the lab.
SCRIPT_KEYS = _REQUIRED_SCRIPTS | (_OPTIONAL_FILES - {"plugstackconfig"})


@dataclass(frozen=True)
class LabContext:
    """Where things live for one lab, as the Slurm daemons see it."""

    root: str
    """Work directory path as seen by the daemons (may differ from the host path)."""
    hostname: str
    munge_socket: str
    ctld_port: int
    slurmd_port: int
    node_ports: Mapping[str, int]
    cgroup_plugin: str


@dataclass(frozen=True)
class FakeDevice:
    """A character device to create under the work directory."""

    relpath: str
    minor: int


@dataclass
class RenderedLab:
    """Result of :func:`render_lab_config`: files to write under ``<W>/etc`` and what else to create."""

    files: dict[str, str] = field(default_factory=dict)
    devices: list[FakeDevice] = field(default_factory=list)
    secret_files: list[str] = field(default_factory=list)
    """Paths relative to the work directory where a random key (JWT, slurm.key) must be generated."""
    executables: set[str] = field(default_factory=set)
    """Names (keys of ``files``) that must be executable."""


# --- tokenizing: slonk_infra.policy.slurmconf, the repository's one reader of Slurm's syntax ---------


def _emit(tokens: Iterable[str], comment: str = "") -> str:
    line = " ".join(tokens)
    if comment:
        line = f"{line} {comment}"
    return line + "\n"


def _dropped(raw: str) -> str:
    body = re.sub(r"\\\r?\n", " ", raw).strip()
    return f"# slurmlab override dropped: {body}\n"


# --- slurm.conf -------------------------------------------------------------


def _includes(text: str) -> list[str]:
    paths = []
    for line in slurmconf.lines(text):
        if len(line.tokens) >= 2 and line.tokens[0].lower() == "include":
            paths.append(slurmconf.unquote(line.tokens[1]))
    return paths


def _match_file(path: str, names: Iterable[str]) -> str | None:
    """Maps a deployed path to a given file name by its longest matching path suffix.

    Returns the rewritten relative pattern (which may keep a glob), or None.
    """
    parts = [p for p in path.split("/") if p]
    names = list(names)
    for i in range(len(parts)):
        suffix = "/".join(parts[i:])
        if any(fnmatch.fnmatchcase(n, suffix) for n in names):
            return suffix
    return None


def _slurm_conf_texts(conf_files: Mapping[str, str]) -> list[tuple[str, str]]:
    """slurm.conf followed by every file it includes (recursively) that is among the given files."""
    if "slurm.conf" not in conf_files:
        raise ConfigError("conf_files has no slurm.conf")
    order = ["slurm.conf"]
    i = 0
    while i < len(order):
        for inc in _includes(conf_files[order[i]]):
            rel = _match_file(inc, conf_files)
            if rel is not None:
                for name in sorted(conf_files):
                    if fnmatch.fnmatchcase(name, rel) and name not in order:
                        order.append(name)
        i += 1
    return [(name, conf_files[name]) for name in order]


def parse_node_names(conf_files: Mapping[str, str]) -> list[str]:
    """All node names defined by NodeName lines (hostlists expanded), in file order."""
    names: list[str] = []
    for line in _node_lines(conf_files):
        names.extend(n for n in line.names if n not in names)
    return names


def _node_lines(conf_files: Mapping[str, str]) -> list[slurmconf.NodeLine]:
    return slurmconf.node_lines(text for _, text in _slurm_conf_texts(conf_files))


def _global_values(conf_files: Mapping[str, str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for _, text in _slurm_conf_texts(conf_files):
        for line in slurmconf.lines(text):
            first = slurmconf.key_value(line.tokens[0]) if line.tokens else None
            if first is None or first[0].lower() in {"nodename", "partitionname", "nodeset", "downnodes"}:
                continue
            values.update(slurmconf.fields(line))
    return values


def _replace_item(value: str, name: str, new: str) -> str:
    """Sets ``name=new`` in a comma list such as AuthInfo, keeping the other items."""
    items = [i for i in slurmconf.unquote(value).split(",") if i and not i.lower().startswith(name + "=")]
    return ",".join([f"{name}={new}", *items])


class _SlurmConfRewriter:
    def __init__(self, conf_files: Mapping[str, str], ctx: LabContext, out: RenderedLab) -> None:
        self.files = conf_files
        self.ctx = ctx
        self.out = out
        self.seen: set[str] = set()
        self.globals = _global_values(conf_files)
        self.jwt = "auth/jwt" in self.globals.get("authalttypes", "")
        auth = self.globals.get("authtype", "auth/munge")
        cred = self.globals.get("credtype", "cred/munge")
        self.munge = auth == "auth/munge" or cred == "cred/munge"
        self.slurm_auth = auth == "auth/slurm" or cred == "cred/slurm"

    def _path(self, rel: str) -> str:
        return f"{self.ctx.root}/{rel}"

    def _file_value(self, key: str, value: str) -> str | None:
        paths = slurmconf.unquote(value).split(",")
        new: list[str] = []
        for p in paths:
            rel = _match_file(p, self.files)
            if rel is None:
                if key in _REQUIRED_SCRIPTS:
                    raise ConfigError(
                        f"slurm.conf {key}={value}: no file among conf_files matches {p!r}; "
                        f"pass the script's contents in conf_files (given: {sorted(self.files)})"
                    )
                return None
            if key in SCRIPT_KEYS:
                self.out.executables.update(n for n in self.files if fnmatch.fnmatchcase(n, rel))
            new.append(self._path(f"etc/{rel}"))
        return ",".join(new)

    def _simple(self, key: str, value: str) -> str | None:
        """New value for a global key; ``value`` unchanged means keep; None means drop."""
        ctx = self.ctx
        fixed = {
            "slurmctldport": str(ctx.ctld_port),
            "slurmdport": str(ctx.slurmd_port),
            "statesavelocation": self._path("state"),
            "slurmdspooldir": self._path("spool/%n"),
            "slurmctldpidfile": self._path("run/slurmctld.pid"),
            "slurmdpidfile": self._path("run/slurmd-%n.pid"),
            "slurmctldlogfile": self._path("log/slurmctld.log"),
            "slurmdlogfile": self._path("log/slurmd-%n.log"),
            "slurmschedlogfile": self._path("log/sched.log"),
            "slurmuser": "root",
            "slurmduser": "root",
            "proctracktype": "proctrack/linuxproc",
            "taskplugin": "task/none",
        }
        if key in fixed:
            return fixed[key]
        if key == "slurmctldhost":
            if key in self.seen:
                return None
            return f"{ctx.hostname}(127.0.0.1)"
        if key in _CONTROLLER_DROP:
            return None
        if key == "slurmdparameters":
            items = [i for i in slurmconf.unquote(value).split(",") if i]
            if "config_overrides" not in (i.lower() for i in items):
                items.append("config_overrides")
            return ",".join(items)
        if key == "authinfo":
            if self.munge:
                value = _replace_item(value, "socket", ctx.munge_socket)
            if self.slurm_auth and "keyfile=" in value.lower():
                value = _replace_item(value, "keyfile", self._path("etc/slurm.key"))
            return value
        if key == "authaltparameters" and "jwt_key=" in value.lower():
            self.out.secret_files.append("etc/jwt_hs256.key")
            return _replace_item(value, "jwt_key", self._path("etc/jwt_hs256.key"))
        if key == "jobacctgathertype" and slurmconf.unquote(value).endswith("/cgroup"):
            return "jobacct_gather/linux"
        if key in _REQUIRED_SCRIPTS or key in _OPTIONAL_FILES:
            new = self._file_value(key, value)
            return value if new is None else new
        return value

    def _node_line(self, line: slurmconf.Line) -> str:
        first = slurmconf.key_value(line.tokens[0])
        assert first is not None
        if first[1].upper() == "DEFAULT":
            return line.raw
        rest = [t for t in line.tokens[1:] if (slurmconf.key_value(t) or ("",))[0].lower() not in _NODE_DROP]
        text = ""
        for name in hostlist.expand_hostlist(first[1]):
            port = self.ctx.node_ports[name]
            extra = ["NodeAddr=127.0.0.1", f"NodeHostname={self.ctx.hostname}", f"Port={port}"]
            text += _emit([f"{first[0]}={name}", *rest, *extra])
        return text

    def rewrite(self, text: str, main: bool) -> str:
        parts: list[str] = []
        for line in slurmconf.lines(text):
            if not line.tokens:
                parts.append(line.raw)
                continue
            if line.tokens[0].lower() == "include" and len(line.tokens) >= 2:
                rel = _match_file(slurmconf.unquote(line.tokens[1]), self.files)
                if rel is None:
                    parts.append(line.raw)
                else:
                    parts.append(_emit([line.tokens[0], self._path(f"etc/{rel}"), *line.tokens[2:]]))
                continue
            first = slurmconf.key_value(line.tokens[0])
            if first is not None and first[0].lower() == "nodename":
                parts.append(self._node_line(line))
                continue
            if first is not None and first[0].lower() in {"partitionname", "nodeset", "downnodes"}:
                parts.append(line.raw)
                continue
            new_tokens: list[str] = []
            changed = False
            for tok in line.tokens:
                kv = slurmconf.key_value(tok)
                if kv is None:
                    new_tokens.append(tok)
                    continue
                key = kv[0].lower()
                new = self._simple(key, kv[1])
                self.seen.add(key)
                if new is None:
                    changed = True
                elif new != kv[1]:
                    changed = True
                    new_tokens.append(f"{kv[0]}={new}")
                else:
                    new_tokens.append(tok)
            if not changed:
                parts.append(line.raw)
            elif new_tokens:
                parts.append(_emit(new_tokens, line.comment))
            else:
                parts.append(_dropped(line.raw))
        if main:
            parts.append(self._missing())
        return "".join(parts)

    def _missing(self) -> str:
        ensure = [
            "SlurmctldHost",
            "SlurmctldPort",
            "SlurmdPort",
            "StateSaveLocation",
            "SlurmdSpoolDir",
            "SlurmctldPidFile",
            "SlurmdPidFile",
            "SlurmctldLogFile",
            "SlurmdLogFile",
            "SlurmUser",
            "SlurmdUser",
            "ProctrackType",
            "TaskPlugin",
            "SlurmdParameters",
        ]
        if self.munge:
            ensure.append("AuthInfo")
        lines = []
        for key in ensure:
            if key.lower() not in self.seen:
                value = self._simple(key.lower(), "")
                if value:
                    lines.append(f"{key}={value}\n")
        if self.jwt and "jwt_key=" not in self.globals.get("authaltparameters", "").lower():
            self.out.secret_files.append("state/jwt_hs256.key")
        if self.slurm_auth:
            self.out.secret_files.append("etc/slurm.key")
        if not lines:
            return ""
        return "# slurmlab localhost overrides for keys absent from the rendered file\n" + "".join(lines)


# --- gres.conf --------------------------------------------------------------


def _fake_device(path: str, devices: dict[str, FakeDevice]) -> str:
    flat = path.removeprefix("/dev/").strip("/").replace("/", "_")
    if path not in devices:
        digits = re.search(r"(\d+)$", flat)
        minor = int(digits.group(1)) if digits else len(devices)
        devices[path] = FakeDevice(f"dev/{flat}", minor)
    return devices[path].relpath


def _gres_line_nodes(values: Mapping[str, str], all_nodes: list[str]) -> list[str]:
    if "nodename" in values:
        return list(hostlist.expand_hostlist(values["nodename"]))
    return all_nodes


def _gpu_type(gres: str) -> str | None:
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and len(parts) == 3:
            return parts[1]
    return None


def _rewrite_gres(
    text: str,
    ctx: LabContext,
    devices: dict[str, FakeDevice],
    gpu_files_per_node: Mapping[str, int],
    conf_files: Mapping[str, str],
) -> str:
    all_nodes = parse_node_names(conf_files)
    extra_nodes = set(gpu_files_per_node)
    parts: list[str] = []
    for line in slurmconf.lines(text):
        kvs = [slurmconf.key_value(t) for t in line.tokens]
        if not line.tokens or any(kv is None for kv in kvs):
            parts.append(line.raw)
            continue
        values = slurmconf.fields(line)
        is_gpu = values.get("name") == "gpu"
        covered = set(_gres_line_nodes(values, all_nodes)) & extra_nodes
        if is_gpu and covered:
            if "file" in values:
                raise ConfigError(
                    f"gpu_files_per_node names {sorted(covered)}, but gres.conf already gives "
                    f"them GPU files: {line.raw.strip()}"
                )
            parts.append(_dropped(line.raw))
            continue
        new_tokens: list[str] = []
        changed = False
        for tok, kv in zip(line.tokens, kvs, strict=True):
            assert kv is not None
            key = kv[0].lower()
            if key == "file":
                paths = hostlist.expand_hostlist(slurmconf.unquote(kv[1]))
                rels = [_fake_device(p, devices) for p in paths]
                new_tokens.append(f"{kv[0]}=" + ",".join(f"{ctx.root}/{r}" for r in rels))
                changed = True
            elif key == "autodetect" and kv[1].lower() != "off":
                new_tokens.append(f"{kv[0]}=off")
                changed = True
            else:
                new_tokens.append(tok)
        parts.append(_emit(new_tokens, line.comment) if changed else line.raw)
    if gpu_files_per_node:
        gres = {name: line.values.get("gres", "") for line in _node_lines(conf_files) for name in line.names}
        parts.append("# slurmlab fake GPUs from gpu_files_per_node\n")
        for node, count in gpu_files_per_node.items():
            if node not in gres:
                raise ConfigError(f"gpu_files_per_node names {node!r}, which slurm.conf does not define")
            files = [_fake_device(f"/dev/nvidia{i}", devices) for i in range(count)]
            gtype = _gpu_type(gres[node])
            tokens = [f"NodeName={node}", "Name=gpu"]
            if gtype:
                tokens.append(f"Type={gtype}")
            tokens.append("File=" + ",".join(f"{ctx.root}/{f}" for f in files))
            parts.append(_emit(tokens))
    return "".join(parts)


# --- cgroup.conf ------------------------------------------------------------


def _rewrite_cgroup(text: str, plugin: str) -> str:
    parts: list[str] = []
    seen = False
    for line in slurmconf.lines(text):
        kvs = [slurmconf.key_value(t) for t in line.tokens]
        if any(kv is not None and kv[0].lower() == "cgroupplugin" for kv in kvs):
            seen = True
            parts.append(f"CgroupPlugin={plugin}\n")
        else:
            parts.append(line.raw)
    if not seen:
        parts.append(f"# slurmlab localhost override\nCgroupPlugin={plugin}\n")
    return "".join(parts)


# --- entry point ------------------------------------------------------------


def render_lab_config(
    conf_files: Mapping[str, str],
    ctx: LabContext,
    gpu_files_per_node: Mapping[str, int] | None = None,
) -> RenderedLab:
    """Applies :data:`OVERRIDES` to ``conf_files`` (name -> contents) for the lab ``ctx``.

    ``gpu_files_per_node`` keys may be hostlist expressions; they are expanded.
    """
    gpus: dict[str, int] = {}
    for expr, count in (gpu_files_per_node or {}).items():
        for node in hostlist.expand_hostlist(expr):
            gpus[node] = count
    out = RenderedLab()
    rewriter = _SlurmConfRewriter(conf_files, ctx, out)
    slurm_texts = dict(_slurm_conf_texts(conf_files))
    devices: dict[str, FakeDevice] = {}
    for name, text in conf_files.items():
        if name in slurm_texts:
            out.files[name] = rewriter.rewrite(text, main=name == "slurm.conf")
        elif name == "gres.conf":
            out.files[name] = _rewrite_gres(text, ctx, devices, gpus, conf_files)
        elif name == "cgroup.conf":
            out.files[name] = _rewrite_cgroup(text, ctx.cgroup_plugin)
        else:
            out.files[name] = text
    if "cgroup.conf" not in out.files:
        out.files["cgroup.conf"] = _rewrite_cgroup("", ctx.cgroup_plugin)
    if "gres.conf" not in out.files and gpus:
        out.files["gres.conf"] = _rewrite_gres("", ctx, devices, gpus, conf_files)
    out.devices = list(devices.values())
    return out
