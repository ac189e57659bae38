"""Finds and removes what the harness created on a host, by name prefix and record: domains (only
those whose metadata records that vtb defined them), pools (only those whose folder is in a state
dir vtb knows), stray QEMU processes and the daemons backends and resources declare (only those a
pid file of vtb's holds), loop devices and mounts (in vtb's folders), namespaces and links a
resource's record names, then what each resource declares it leaves (harness/resources/leftovers.py:
scratch files, Ceph clusters' folders, hugepages, md arrays by plan, ...). Safe after a SIGKILL;
never touches anything without the prefix."""
from __future__ import annotations

import json
import os
import re
import signal
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt

from harness.common import paths, pids
from harness.hosts import Host, LocalHost, Node
from harness.hosts.files import stat_numbers
from harness.hosts.folders import untrusted
from harness.libvirt import pausing
from harness.libvirt.libvirt_conn import Unanswered, connect, domain_call
from harness.libvirt.libvirt_xml import OWNER_NS, UNRECORDED, owner_of
from harness.resources import leftovers as resource_leftovers


def _kept(name: str, keep: tuple[str, ...]) -> bool:
    return any(k in name for k in keep)


LIBVIRT_QEMU_RUN = "/run/libvirt/qemu"   # libvirt's pid file and live XML (with vtb's owner record) per domain

# Reads "pid<TAB>folder" lines; prints "pid<TAB>file" for each pid file (*.pid in the folder or its
# run/) that holds that pid: root's own file, not a link (anyone can write a `vtb-` file in /tmp).
# A pid file of libvirt's counts only when its domain's live XML has vtb's owner record.
_PID_FILES = r'''while IFS="$(printf '\t')" read -r pid dir; do
  for f in "$dir"/*.pid "$dir"/run/*.pid; do
    [ -f "$f" ] && [ ! -L "$f" ] && [ -O "$f" ] || continue
    v=; read -r v < "$f" || true
    [ "$v" = "$pid" ] || continue
    case "$f" in "$1"/*) grep -qs "$2" "${f%.pid}.xml" || continue;; esac
    printf '%s\t%s\n' "$pid" "$f"
  done
done'''


def _pid_file_folders(args: list[str]) -> list[str]:
    """The folders where a daemon's pid file may be, from the paths in its own arguments (a
    `--pidfile X`, a `-c dir/ceph.conf`, `--defaults-file=dir/server.cnf`, SPDK's `-S run_dir`)."""
    paths_ = {v for arg in args for part in arg.split(",") for v in [part.split("=", 1)[-1]] if v.startswith("/")}
    return sorted({f for v in paths_ for f in (v, os.path.dirname(v))} - {"/", ""})


def _arguments(host: Node, pids: list[int]) -> dict[int, list[str]]:
    """Each process's arguments as it got them (/proc/<pid>/cmdline: a path may hold spaces)."""
    script = r'''for p; do printf '%s\t' "$p"; tr '\0' '\t' < "/proc/$p/cmdline" 2>/dev/null; echo; done'''
    out = host.run(["sh", "-c", script, "-", *map(str, pids)], timeout=30, check=False).stdout.decode(errors="replace")
    return {int(pid): rest.rstrip("\t").split("\t") for pid, _, rest in (line.partition("\t") for line in out.splitlines())
            if pid.isdigit()}


def _daemons() -> tuple[str, ...]:
    """Executables gc looks for: QEMUs, the daemons resources declare (a host slot's database
    server), and every backend's host-side daemons."""
    from harness import backends  # its plug-ins import much that gc's other work does not need
    return ("qemu-system", *dict.fromkeys([*resource_leftovers.processes(),
                                           *(p.executable for p in backends.host_processes())]))


def _candidates(host: Node, prefix: str, keep: tuple[str, ...]) -> dict[int, tuple[str, str]]:
    """root's processes of a daemon gc knows whose arguments name the prefix: pid -> (exe, args)."""
    out = host.run(["ps", "-ww", "-eo", "pid=,uid=,args="], timeout=30, check=False).stdout.decode(errors="replace")
    candidates: dict[int, tuple[str, str]] = {}
    for line in out.splitlines():
        pid, uid, args = (line.split(None, 2) + ["", ""])[:3]
        exe = os.path.basename(args.split(" ", 1)[0])
        if uid == "0" and exe.startswith(_daemons()) and prefix in args and not _kept(args, keep):
            candidates[int(pid)] = (exe, args)
    return candidates


def _recorded(host: Node, prefix: str, keep: tuple[str, ...], candidates: dict[int, tuple[str, str]]
              ) -> tuple[set[int], set[int]]:
    """The candidates a pid file of vtb's holds (the prefix's), and the QEMUs of other domains."""
    argv = _arguments(host, list(candidates))
    lines = "".join(f"{pid}\t{folder}\n" for pid, (exe, _) in candidates.items()
                    for folder in [*_pid_file_folders(argv.get(pid, [])),
                                   *([LIBVIRT_QEMU_RUN] if exe.startswith("qemu-system") else [])])
    found = host.run(["sh", "-c", _PID_FILES, "-", LIBVIRT_QEMU_RUN, OWNER_NS], input=lines.encode(), timeout=60,
                     check=False).stdout.decode(errors="replace")
    roots, recorded, other_domains = _state_roots(host), set(), set()
    for line in found.splitlines():
        pid, _, f = line.partition("\t")
        if f.startswith(LIBVIRT_QEMU_RUN + "/"):
            # libvirt names the pid file for its domain: a QEMU is the prefix's by that name, not by a
            # path in its arguments (the nested host's L1 runs on /var/tmp/vtb-ci-nested/..., which
            # names the ci fleet's prefix; its teardown killed the L1 while both ran)
            domain = Path(f).stem
            (recorded if domain.startswith(prefix) and not domain.startswith(keep) else other_domains).add(int(pid))
        elif any(_made_by_vtb(p, prefix, keep, roots, SCRATCH_MOUNT_DIRS) for p in (f, os.path.dirname(f))):
            recorded.add(int(pid))
    return recorded, other_domains


def _processes(host: Node, prefix: str, keep: tuple[str, ...] = ()) -> tuple[list[tuple[dict, str]], list[str]]:
    """QEMUs, storage daemons, database servers (a host slot's, see mysql) and Ceph daemons on the
    host that are vtb's by record, each as its proof (harness/common/pids.py, taken as it is found:
    only that process is killed, never one that has its pid later) and its executable, and notes on
    those with the prefix in their command line that are not. Only root's count (as vtb runs them);
    the record is a pid file holding the process's pid, in a folder vtb made for the prefix (its
    state dirs, its scratch mounts) that the process's own arguments name, or libvirt's pid file
    of a domain whose XML has vtb's owner record. A prefix in the arguments alone (root's own
    `qemu ... /srv/vtb-test.img`) is listed."""
    candidates = _candidates(host, prefix, keep)
    if not candidates:
        return [], []
    proofs = dict(zip(candidates, pids.on(host, "proofs", list(candidates), timeout=30)))
    recorded, other_domains = _recorded(host, prefix, keep, candidates)
    ours = [(proofs[pid], exe) for pid, (exe, _) in candidates.items() if pid in recorded and proofs[pid]]
    notes = [f"(process {pid} ({exe}) not stopped: its command line names {prefix} but no pid file of vtb's holds "
             f"it; if it is yours to stop, `kill {pid}`)" for pid, (exe, _) in candidates.items()
             if pid not in recorded | other_domains]
    return ours, notes


def _domains(conn: libvirt.virConnect, prefix: str, keep: tuple[str, ...] = ()) -> list[str]:
    """The prefixed domains that record vtb defined them (libvirt_xml.owner_metadata); a prefixed
    name alone is listed, not removed."""
    removed = []
    for dom in conn.listAllDomains():
        if not dom.name().startswith(prefix) or dom.name().startswith(keep):
            continue
        try:
            if owner_of(domain_call(dom, "XMLDesc", 0)) is None:
                removed.append(f"(domain {dom.name()} not removed: {UNRECORDED})")
                continue
            if dom.isActive():
                domain_call(dom, "destroy")
            if dom.isPersistent():
                domain_call(dom, "undefineFlags", libvirt.VIR_DOMAIN_UNDEFINE_NVRAM
                            | libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
        except Unanswered as e:   # one stuck domain is said; the rest of gc goes on
            removed.append(f"(domain {dom.name()} not removed: {e})")
            continue
        removed.append(f"domain {dom.name()}")
    return removed


def _pool_of(name: str, prefix: str) -> bool:
    """A fleet's pool carries the fleet's prefix itself (vtb-ci), its domains the prefix and a dash."""
    return name.startswith(prefix) or name == prefix.removesuffix("-")


def _pool_folder(pool: libvirt.virStoragePool) -> str:
    return ET.fromstring(pool.XMLDesc(0)).findtext("target/path") or ""


def _pool_in(folder: str, roots: tuple[str, ...]) -> bool:
    """Whether a pool's folder is inside one of the state dirs (vtb makes its pools there)."""
    return bool(folder) and any(Path(folder).is_relative_to(root) for root in roots)


def _pools(conn: libvirt.virConnect, prefix: str, keep: tuple[str, ...] = (), roots: tuple[str, ...] = ()) -> list[str]:
    """The prefixed pools whose folder is in a state dir vtb knows (`roots`, as _state_roots gives
    them); a prefixed pool elsewhere is listed, not removed."""
    removed = []
    for pool in conn.listAllStoragePools():
        if not _pool_of(pool.name(), prefix) or any(_pool_of(pool.name(), k) for k in keep):
            continue
        if not _pool_in(folder := _pool_folder(pool), roots):
            removed.append(f"(pool {pool.name()} not removed: its folder {folder or '(none)'} is in no state dir vtb "
                           "knows; if it is yours to remove, `virsh pool-destroy` and `virsh pool-undefine` it)")
            continue
        try:
            if not pool.isActive():
                pool.create()
            pool.refresh()
            for vol in pool.listAllVolumes():
                vol.delete()
        except libvirt.libvirtError:
            pass   # its directory is gone already (the fleet's folder was removed): only the definition is left
        for undo in (pool.destroy, pool.delete):   # delete removes the pool's (now empty) directory
            try:
                undo()
            except libvirt.libvirtError:
                pass
        pool.undefine()
        removed.append(f"pool {pool.name()} and its volumes")
    return removed


SCRATCH_MOUNT_DIRS = ("/run", "/tmp")   # where vtb mounts a point's filesystems (a database's, fio's), by prefix
SCRATCH_FILE_DIRS = ("/dev/shm",)       # where vtb keeps a scratch file outside its state dirs (device-profile's tmpfs)


def _made_by_vtb(path: str, prefix: str, keep: tuple[str, ...], state_roots: tuple[str, ...],
                 scratch_dirs: tuple[str, ...]) -> bool:
    """Whether a path (a mount point, a loop's backing file) is one vtb makes for the prefix and no
    `keep` prefix owns: named by the prefix directly in one of its scratch dirs, or with a prefixed
    folder or file in a state dir (an array's filesystem, a fleet's hugetlbfs, a scratch file); only
    the names vtb gives count, not the state dir's own. A prefixed name anywhere else (a user's
    /mnt/vtb-backup, /home/u/vtb-disk.img) is not vtb's."""
    p = Path(path)
    if str(p.parent) in scratch_dirs:
        named = (p.name,)
    else:
        named = next((p.relative_to(root).parts for root in state_roots if p.is_relative_to(root)), ())
    return any(n.startswith(prefix) for n in named) and not any(n.startswith(keep) for n in named)


def _state_roots(host: Host) -> tuple[str, ...]:
    """The state dirs known here, as they are on the host (the same path, or an ssh host's own)."""
    return tuple({r for d in state_dirs() for r in (d, str(host.fleet_dir(Path(d), "")))})


def _sandbox_cgroups(host: Host) -> list[str]:
    """The cgroups of tool sandboxes whose shell was killed (guest-agents/confine.sh), removed by
    confine.sh's own rule: a sandbox's cgroup whose shell is gone, once empty."""
    script = (paths.GUEST_AGENTS / "confine.sh").read_text() + "\nstale_confine_cgroups_removed\n"
    out = host.run(["sh", "-c", script], timeout=30, check=False).stdout.decode(errors="replace")
    return [line for line in out.splitlines() if line.startswith("cgroup ")]


def _loops_and_mounts(host: Host, prefix: str, keep: tuple[str, ...] = ()) -> list[str]:
    """Mounts and loops over files that vtb makes (see _made_by_vtb); in the shared scratch dirs,
    where anyone may use a vtb- name, only root's (a user's FUSE mount at /tmp/vtb-x is theirs)."""
    removed = []
    roots = _state_roots(host)
    mounts = host.run(["cat", "/proc/mounts"], timeout=30, check=False).stdout.decode(errors="replace")
    targets = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[1])   # \040: a space
               for line in reversed(mounts.splitlines())]
    targets = [t for t in targets if _made_by_vtb(t, prefix, keep, roots, SCRATCH_MOUNT_DIRS)]
    owners = stat_numbers(host, "%u", [t for t in targets if os.path.dirname(t) in SCRATCH_MOUNT_DIRS])
    for target in targets:
        if os.path.dirname(target) in SCRATCH_MOUNT_DIRS and owners.get(target) != 0:
            removed.append(f"(mount {target} not removed: it is not root's; if it is yours to remove, `umount {target}`)")
            continue
        host.run(["umount", "-l", target], timeout=60, check=False)
        removed.append(f"mount {target}")
    out = host.run(["losetup", "--json", "--list"], timeout=30, check=False).stdout.decode(errors="replace")
    listed = json.loads(out or '{"loopdevices": []}').get("loopdevices", [])
    loops = [(loop["name"], loop.get("back-file") or "") for loop in listed]
    loops = [(name, back) for name, back in loops if _made_by_vtb(back, prefix, keep, roots, SCRATCH_FILE_DIRS)]
    owners = stat_numbers(host, "%u", [back for _, back in loops if os.path.dirname(back) in SCRATCH_FILE_DIRS])
    for name, back in loops:
        # a backing file already deleted (" (deleted)") cannot be asked; its vtb- name in a scratch dir decides
        if os.path.dirname(back) in SCRATCH_FILE_DIRS and owners.get(back, 0) != 0:
            removed.append(f"(loop device {name} not removed: its file {back} is not root's; if it is yours to "
                           f"remove, `losetup -d {name}`)")
            continue
        host.run(["losetup", "-d", name], timeout=60, check=False)
        removed.append(f"loop device {name}")
    return removed


def _namespaces(host: Node, prefix: str) -> list[str]:
    out = host.run(["ip", "netns", "list"], timeout=30, check=False).stdout.decode(errors="replace")
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]


def _links(host: Node, prefix: str, keep: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(name, alias) of links (a Ceph cluster's bridge and veths) whose alias carries the prefix (a
    name has no room for it: 15 characters)."""
    out = host.run(["ip", "-j", "link", "show"], timeout=30, check=False).stdout.decode(errors="replace")
    return [(link["ifname"], link["ifalias"]) for link in json.loads(out or "[]")
            if link.get("ifalias", "").startswith(prefix) and not link["ifalias"].startswith(keep)]


def _recorded_networks(prefix: str, keep: tuple[str, ...] = ()) -> set[str]:
    """The namespaces and links that the resources' records on this machine name (a local Ceph
    cluster's, the nested hosts' shared bridge): only those are removed by name."""
    return resource_leftovers.recorded_networks(_scope(LocalHost(), prefix, keep))


def _networks(host: Node, prefix: str, keep: tuple[str, ...] = ()) -> list[str]:
    """A Ceph cluster's storage-node namespaces, its bridge and its veths, where a plan of vtb's names
    them (only on this machine: nowhere else does vtb make any); a vtb- name alone is listed."""
    recorded = _recorded_networks(prefix, keep) if host.is_this_machine else set()
    removed = []
    for ns in _namespaces(host, prefix):
        if ns.startswith(keep):
            continue
        if ns not in recorded:
            removed.append(f"(namespace {ns} not removed: it has a {prefix} name but no Ceph plan of vtb's names "
                           f"it; if it is yours to remove, `ip netns del {ns}`)")
        elif host.run(["ip", "netns", "del", ns], timeout=30, check=False).returncode == 0:
            removed.append(f"namespace {ns}")
    for name, alias in _links(host, prefix, keep):
        if name not in recorded:
            removed.append(f"(link {name} ({alias}) not removed: no Ceph plan of vtb's names it; if it is yours "
                           f"to remove, `ip link del {name}`)")
        elif host.run(["ip", "link", "del", name], timeout=30, check=False).returncode == 0:
            removed.append(f"link {name} ({alias})")
    return removed


def leftovers(prefix: str, host: Host = LocalHost(), keep: tuple[str, ...] = ()) -> list[str]:
    """What exists with this prefix on the host (but for `keep`), without removing it."""
    found = [f"process {proof['pid']} ({exe})" for proof, exe in _processes(host, prefix, keep)[0]]
    found += [f"namespace {ns}" for ns in _namespaces(host, prefix) if not _kept(ns, keep)]
    found += [f"link {b}" for b, _ in _links(host, prefix, keep)]
    try:
        conn = connect(host.uri)
    except libvirt.libvirtError as e:   # what else remains is said; its domains and pools cannot be known
        return [*found, f"(its libvirtd does not answer, so its domains and pools are unknown: {e.get_error_message()})"]
    roots = _state_roots(host)
    try:   # by the rules collect removes them by: a vtb- name alone is not vtb's
        found += [f"domain {d.name()}" for d in conn.listAllDomains()
                  if d.name().startswith(prefix) and not _kept(d.name(), keep) and owner_of(d.XMLDesc(0)) is not None]
        found += [f"pool {p.name()}" for p in conn.listAllStoragePools()
                  if _pool_of(p.name(), prefix) and not _kept(p.name(), keep) and _pool_in(_pool_folder(p), roots)]
    except libvirt.libvirtError as e:
        found.append(f"(its libvirtd stopped answering as its domains and pools were listed: {e.get_error_message()})")
    finally:
        conn.close()
    return found


def resume_left_paused(host: Host, keep: tuple[str, ...], results_dir: Path) -> list[str]:
    """Resumes the live fleets' VMs a killed run left suspended, unless a run is measuring now (it
    suspends them on purpose); says which, or why not."""
    from harness.results.store import live_runs
    if not keep:
        return []
    if running := live_runs(results_dir):
        return [f"(paused VMs left as they are: run {', '.join(running)} is measuring)"]
    try:
        conn = connect(host.uri)
    except libvirt.libvirtError:   # a bound passed too (libvirt_conn.Unanswered): collect says so
        return []
    try:
        return [f"resumed {name} (left paused by a run that was killed)"
                for name in pausing.resume_paused(conn, keep)]
    except libvirt.libvirtError as e:
        return [f"(could not resume paused VMs: {e.get_error_message()})"]
    finally:
        conn.close()


def collect(prefix: str, host: Host = LocalHost(), keep: tuple[str, ...] = ()) -> list[str]:
    """Removes everything with this prefix on the host (through its libvirt and its own commands:
    this machine or a nested one), except what starts with a `keep` prefix (owned by live state),
    and says what it removed."""
    if not prefix.startswith(paths.PREFIX):
        raise ValueError(f"refusing to collect {prefix!r}: only names starting with {paths.PREFIX} are ours")
    removed = []
    try:
        conn = connect(host.uri)
    except libvirt.libvirtError as e:
        conn = None
        removed.append(f"(libvirt at {host.uri} not reachable, skipped domains and pools: {e.get_error_message()})")
    if conn is not None:
        try:
            removed += _domains(conn, prefix, keep)
            removed += _pools(conn, prefix, keep, _state_roots(host))
        finally:
            conn.close()
    if host.stopped():
        return removed  # nothing runs on a host that stopped
    ours, notes = _processes(host, prefix, keep)   # QEMUs libvirt no longer knows, probes, daemons
    killed = pids.on(host, "signal_each", [proof for proof, _ in ours], signal.SIGKILL, timeout=30) if ours else []
    removed += [f"process {proof['pid']} ({exe})" for (proof, exe), done in zip(ours, killed) if done]
    removed += notes
    removed += _loops_and_mounts(host, prefix, keep)
    removed += _sandbox_cgroups(host)
    removed += _networks(host, prefix, keep)
    return removed + resource_leftovers.remove_all(_scope(host, prefix, keep))


def _scope(host: Host, prefix: str, keep: tuple[str, ...] = (), elsewhere: bool = False) -> resource_leftovers.Scope:
    """A pass of the resources' own leftovers (harness/resources/leftovers.py) on the host."""
    return resource_leftovers.Scope(host, prefix, keep, _state_paths(), elsewhere)


def collect_recorded(prefix: str, keep: tuple[str, ...] = (), elsewhere: bool = False) -> list[str]:
    """What dead fleets' records say they made, wherever it is (this machine, a nested or an ssh
    host): backend host sides, md arrays, the brd module; with `elsewhere`, only what is on other
    hosts than this machine and only what was removed (collected before this machine's own
    leftovers, which may be the nested hosts these are; the full pass after it says what is left).
    Only for `gc` and `testbed down --all`, after the fleets' guests are gone: a fleet being brought
    up keeps its plans in the same place. Registered state dirs that are not read (see state_dirs)
    are said, with the fix."""
    scope = _scope(LocalHost(), prefix, keep, elsewhere)
    # backends first: a host side (a daemon exporting a file on an array) goes before what it stands on
    found = _recorded_backends(scope) + resource_leftovers.remove_all(scope, by_record=True)
    return removals_and_notes(found)[0] if elsewhere else skipped_state_dirs() + found


def _recorded_backends(scope: resource_leftovers.Scope) -> list[str]:
    """The host sides a killed run left (a controller bound to vfio-pci, storage daemons, their
    sockets), undone by each backend's own host_down from its plan, wherever it ran."""
    plans, notes = resource_leftovers.recorded_plans(scope, "backend", "prefix")
    done, stuck = undo_backends(plans)
    return done + stuck + notes


def undo_backends(plan_files: list[Path]) -> tuple[list[str], list[str]]:
    """The backend host sides these plans describe (each plan is written before its side is set
    up), undone by the backend's own host_down, each plan removed once done: what went, and (in
    parentheses) what could not, its plan kept for the next try."""
    from harness import backends  # its plug-ins import much that gc's other work does not need

    def named(plan) -> str:
        return f"{plan.disk['backend']} host side of {plan.prefix}"

    def undone(host: Host, plan) -> str:
        backends.get(plan.disk["backend"]).host_down(host, plan)
        return named(plan)
    return resource_leftovers.undo_by_plans(plan_files, backends.read_plan, named, undone)


def removals_and_notes(said: list[str]) -> tuple[list[str], list[str]]:
    """What gc and teardown removed, apart from their notes on what they did not (each in parentheses)."""
    return [s for s in said if not s.startswith("(")], [s for s in said if s.startswith("(")]


def register_state_dir(state_dir: Path) -> None:
    """Remembers, machine-wide, a state dir that has fleets: `gc` asks each which fleets are live."""
    known = set(registered_dirs())
    if str(state_dir) not in known:
        paths.STATE_REGISTRY.parent.mkdir(parents=True, exist_ok=True)
        with open(paths.STATE_REGISTRY, "a") as f:
            f.write(f"{state_dir}\n")


def registered_dirs() -> list[str]:
    """Every state dir the registry lists (each that a run or fleet used on this machine)."""
    try:
        return [l for l in paths.STATE_REGISTRY.read_text().splitlines() if l.strip()]
    except OSError:
        return []


def state_dirs() -> list[str]:
    """The registered state dirs gc reads records from and acts on: only those no other user can
    have written in (folders.untrusted). A registered dir can be removed and made again by anyone
    (/var/tmp/vtb-ci), and a plan planted there would have root act on what it names."""
    return [d for d in registered_dirs() if untrusted(Path(d)) is None]


def _state_paths() -> tuple[Path, ...]:
    return tuple(map(Path, state_dirs()))


def skipped_state_dirs() -> list[str]:
    """Notes on the registered state dirs that exist but are not read, each with why and the fix."""
    return [f"(state dir {d} not read: {why}, so its records may not be vtb's. Fix: if it is yours, make it and the "
            f"folders above it root's and not writable by others (`chown root: {d}; chmod go-w {d}`); otherwise "
            f"remove its line from {paths.STATE_REGISTRY})"
            for d in registered_dirs() if os.path.lexists(d) and (why := untrusted(Path(d)))]


def live_prefixes(extra_state_dirs: tuple[Path, ...] = ()) -> tuple[str, ...]:
    """Name prefixes of what live state owns: every fleet with Terraform state in a known state
    dir, unless it belongs to a run whose process is gone (a SIGKILLed sweep), and what the
    resources say live state owns there (a nested host, see resources/leftovers.live_names)."""
    from harness.common.pids import owner_alive
    live = []
    trusted = {*map(Path, state_dirs()), *extra_state_dirs}
    for d in {*trusted, *map(Path, registered_dirs())}:
        read = d in trusted   # elsewhere nothing is read: every fleet there is kept (keeping is the safe side)
        # a fleet's Terraform root: <fleet>/, or <fleet>/hosts/<host>/ for a fleet that spans hosts
        for tfvars in [*d.glob("*/fleet.tfvars.json"), *d.glob("*/hosts/*/fleet.tfvars.json")] if d.exists() else []:
            who = tfvars.parent / "owner.json"
            if read and who.exists() and not owner_alive(json.loads(who.read_text())):
                continue
            fleet = tfvars.parent if tfvars.parent.parent.name != "hosts" else tfvars.parent.parent.parent
            live.append(f"{paths.PREFIX}{fleet.name}-")
        live += resource_leftovers.live_names(d, read)
    return tuple(sorted(set(live)))
