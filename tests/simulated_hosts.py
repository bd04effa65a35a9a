"""Simulated hosts on one machine, and a Ringmaster cluster across them, for
multi-host tests and benchmarks.

Each host is a network namespace with an address of its own on a bridge,
its own hostname (a UTS namespace) and its own /dev/shm and /tmp (a mount
namespace with fresh tmpfs mounts). The bridge sits in a namespace of its
own; this process reaches the hosts through one more veth pair with an
address on the bridge's subnet. Traffic goes only between namespaces made
here. A host's link can be cut and restored, or throttled.

Needs root and iproute2; `unavailable()` says why hosts cannot be made.
Everything made here is removed by close() (a `with` block calls it), and
what a killed run left behind is removed by the next one.

    with Hosts(3) as hosts, Cluster(hosts, root, worker_hosts=[1, 2]) as cluster:
        cluster.start()
        job = cluster.submit(spec_yaml)
"""
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import time

from chaos_cluster import ClusterQueries, alive, bin_dir, environ_of, wait_for

PREFIX = "rmh"  # of every namespace and link made here: rmh<pid>-...
COORDINATOR_PORT = 7070  # each host has ports of its own
WORKER_PORT = 7080
WORKER_METRICS_PORT = 7081
COORDINATOR_METRICS_PORT = 9090


def _ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout




def unavailable():
    """Why simulated hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "simulated hosts need root (network and mount namespaces)"
    for tool in ("ip", "nsenter", "unshare"):
        if shutil.which(tool) is None:
            return f"simulated hosts need `{tool}` (iproute2, util-linux)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot create a network namespace: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _kill_namespace_processes(netns):
    """SIGKILLs every process in network namespace `netns` and waits until
    none is left (they may be another process's children: not reaped here)."""
    def pids():
        out = _ip("netns", "pids", netns, check=False)
        return [int(p) for p in out.split()]

    for pid in pids():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def gone():
        return all(not alive(p) for p in pids())
    try:
        wait_for(gone, 10, f"processes of {netns} exit")
    except TimeoutError:
        pass






def remove_stale():
    """Removes namespaces (and with them their links) that a run which no
    longer exists left behind."""
    for line in _ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.match(rf"^{PREFIX}(\d+)-", name)
        if m and not alive(int(m.group(1))):
            _kill_namespace_processes(name)
            _ip("netns", "del", name, check=False)
            shutil.rmtree(f"/run/{PREFIX}{m.group(1)}", ignore_errors=True)


def _free_subnet():
    """A /24 in 10.200.0.0/13 that no interface or route here uses."""
    used = []
    for line in _ip("-4", "route", "show", "table", "all", check=False).splitlines():
        token = line.split()[0] if line.split() else ""
        if token in ("broadcast", "local", "unicast") and len(line.split()) > 1:
            token = line.split()[1]
        try:
            used.append(ipaddress.ip_network(token, strict=False))
        except ValueError:
            pass
    start = os.getpid() % 2048
    for k in range(2048):
        n = (start + k) % 2048
        net = ipaddress.ip_network(f"10.{200 + n // 256}.{n % 256}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free /24 in 10.200.0.0/13")


# With Hosts(machines=True): what each host has of its own, over this
# machine's (an overlay: its files as they were, changes its own), as
# separate machines would; and /srv, one directory every host shares, as
# an NFS mount would be.
MACHINE_DIRS = ("/etc", "/usr/local", "/var/lib")


class Hosts:
    """`count` simulated hosts, host0 .. host<count-1>. With `racks` (lists
    of host indices), each rack after the first has a switch of its own,
    joined to the first's by a spine link that throttle_spine() can slow;
    hosts in no list are on the first switch."""

    def __init__(self, count, machines=False, racks=None):
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        remove_stale()
        self.tag = f"{PREFIX}{os.getpid()}"
        self.count = count
        self.machines = machines
        self.subnet = _free_subnet()
        hosts = list(self.subnet.hosts())
        self.local_address = str(hosts[0])  # this process, on the bridge
        self.addresses = [str(hosts[10 + i]) for i in range(count)]
        self.switch = f"{self.tag}-sw"
        self.run_dir = f"/run/{self.tag}"
        self.namespaces = [f"{self.tag}-{i}" for i in range(count)]
        self.racks = [list(r) for r in (racks or [])]
        self.holders = []
        self.procs = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self):
        prefix = self.subnet.prefixlen
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        # This process's leg: <tag> here, "local" on the bridge.
        _ip("link", "add", self.tag, "type", "veth", "peer", "name", "local",
            "netns", self.switch)
        _ip("-n", self.switch, "link", "set", "local", "master", "br0", "up")
        _ip("addr", "add", f"{self.local_address}/{prefix}", "dev", self.tag)
        _ip("link", "set", self.tag, "up")
        # Every host resolves every host's name, as cluster DNS would.
        os.makedirs(self.run_dir, exist_ok=True)
        self.names = {}
        self._write_hosts()
        # Rack k > 0: bridge br<k>, joined to br0 by spine<k> (on br<k>) and
        # uplink<k> (on br0).
        bridge_of = {}
        for k, rack in enumerate(self.racks):
            if k > 0:
                _ip("-n", self.switch, "link", "add", f"br{k}", "type", "bridge")
                _ip("-n", self.switch, "link", "set", f"br{k}", "up")
                _ip("-n", self.switch, "link", "add", f"spine{k}", "type", "veth", "peer",
                    "name", f"uplink{k}")
                _ip("-n", self.switch, "link", "set", f"spine{k}", "master", f"br{k}", "up")
                _ip("-n", self.switch, "link", "set", f"uplink{k}", "master", "br0", "up")
            for i in rack:
                bridge_of[i] = f"br{k}"
        for i, ns in enumerate(self.namespaces):
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", self.switch, "link", "add", f"host{i}", "type", "veth", "peer",
                "name", "eth0", "netns", ns)
            _ip("-n", self.switch, "link", "set", f"host{i}", "master",
                bridge_of.get(i, "br0"), "up")
            _ip("-n", ns, "addr", "add", f"{self.addresses[i]}/{prefix}", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            self.holders.append(self._hold(i, ns))

    def _hold(self, i, ns):
        """A process that keeps host i's UTS and mount namespaces, made with
        the hostname, the fresh /dev/shm and /tmp and the hosts' names."""
        private = ""
        if self.machines:
            shared_srv = os.path.join(self.run_dir, "srv")
            os.makedirs(shared_srv, exist_ok=True)
            for d in MACHINE_DIRS:
                layer = os.path.join(self.run_dir, f"host{i}", d.strip("/").replace("/", "-"))
                os.makedirs(layer + "/upper", exist_ok=True)
                os.makedirs(layer + "/work", exist_ok=True)
                private += (f"mount -t overlay overlay -o lowerdir={d},upperdir={layer}/upper,"
                            f"workdir={layer}/work {d} && ")
            private += f"mount --bind {shared_srv} /srv && "
        script = ("hostname \"$0\" && mount -t tmpfs -o mode=1777 tmpfs /dev/shm && "
                  "mount -t tmpfs -o mode=1777 tmpfs /tmp && " + private +
                  "mount --bind \"$1\" /etc/hosts && echo ready && exec sleep 2147483647")
        holder = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{ns}", "unshare", "--uts", "--mount",
             "--propagation", "private", "--", "sh", "-c", script, self.hostname(i),
             os.path.join(self.run_dir, "hosts")],
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        line = holder.stdout.readline().strip()
        holder.stdout.close()
        if line != "ready":
            holder.kill()
            holder.wait()
            raise RuntimeError(f"host {i}: namespaces not made (exit {holder.poll()})")
        return holder

    def _write_hosts(self):
        """The hosts' names, and those given to name(), in the file every
        host has as /etc/hosts: written over in place, since each host's
        view is a bind mount of this file (of its inode)."""
        lines = ["127.0.0.1 localhost", "::1 localhost"]
        lines += [f"{self.addresses[i]} {self.hostname(i)}" for i in range(self.count)]
        lines += [f"{a} {name}" for name, addresses in self.names.items() for a in addresses]
        path = os.path.join(self.run_dir, "hosts")
        with open(path, "r+" if os.path.exists(path) else "w") as f:
            f.write("\n".join(lines) + "\n")
            f.truncate()

    def name(self, name, addresses):
        """Every host resolves `name` to `addresses` from now on (none: it
        resolves to nothing), as a Service's DNS name follows its ready
        endpoints."""
        self.names[name] = list(addresses)
        self._write_hosts()

    def hostname(self, i):
        return f"host{i}"

    def address(self, i):
        return self.addresses[i]

    def enter(self, i, cwd=None):
        """The argv prefix that runs a program on host i, in `cwd` (default
        this process's working directory; the hosts share the file system
        but for /tmp and /dev/shm)."""
        # nsenter opens --wd before it enters the mount namespace: a
        # directory in the host's own /tmp is entered afterwards.
        return ["nsenter", "-t", str(self.holders[i].pid), "-n", "-u", "-m",
                f"--wd={os.getcwd()}", "--", "env", f"--chdir={cwd or os.getcwd()}"]

    def popen(self, i, argv, cwd=None, **kwargs):
        """Starts `argv` on host i in a session of its own; close() kills it."""
        proc = subprocess.Popen(self.enter(i, cwd) + list(argv), start_new_session=True,
                                **kwargs)
        self.procs.append(proc)
        return proc

    def run(self, i, argv, cwd=None, timeout=120, **kwargs):
        """Runs `argv` on host i to completion, capturing its output as text."""
        return subprocess.run(self.enter(i, cwd) + list(argv), capture_output=True, text=True,
                              timeout=timeout, **kwargs)

    def processes(self, i, job_id=None):
        """pids of host i's processes, only those of Ringmaster job `job_id`
        (by RINGMASTER_JOB_ID in their environment) when given."""
        found = []
        for pid in (int(p) for p in _ip("netns", "pids", self.namespaces[i]).split()):
            if job_id is None or (environ_of(pid) or {}).get("RINGMASTER_JOB_ID") == job_id:
                if alive(pid):
                    found.append(pid)
        return found

    def cut(self, i):
        """Host i loses its network link (its switch port goes down)."""
        _ip("-n", self.switch, "link", "set", f"host{i}", "down")

    def restore(self, i):
        _ip("-n", self.switch, "link", "set", f"host{i}", "up")

    def throttle(self, i, mbit):
        """Host i's link carries at most `mbit` megabits a second each way
        (a token bucket on both ends of it): a slow NIC or cable."""
        for ns, link in ((self.namespaces[i], "eth0"), (self.switch, f"host{i}")):
            self._tbf(ns, link, mbit)

    def throttle_spine(self, mbit):
        """Every link between racks carries at most `mbit` megabits a second
        each way: racks under one switch, their uplinks oversubscribed."""
        for k in range(1, len(self.racks)):
            for link in (f"spine{k}", f"uplink{k}"):
                self._tbf(self.switch, link, mbit)

    def _tbf(self, ns, link, mbit):
        tc = shutil.which("tc", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") or "tc"
        r = subprocess.run([tc, "-n", ns, "qdisc", "replace", "dev", link, "root", "tbf",
                            "rate", f"{mbit}mbit", "burst", "64kb", "latency", "500ms"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"tc qdisc on {link}: {r.stderr.strip()}")

    def traffic(self, i):
        """Bytes host i has sent and received on its link: (tx, rx)."""
        link = json.loads(_ip("-n", self.namespaces[i], "-s", "-j", "link", "show", "eth0"))[0]
        stats = link.get("stats64", link.get("stats"))
        return stats["tx"]["bytes"], stats["rx"]["bytes"]

    def close(self):
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for ns in self.namespaces:
            _kill_namespace_processes(ns)
        for proc in self.procs + self.holders:
            proc.kill()
            proc.wait()
        for ns in self.namespaces + [self.switch]:
            _ip("netns", "del", ns, check=False)  # takes its links along
        _ip("link", "del", self.tag, check=False)
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Cluster(ClusterQueries):
    """A coordinator on one simulated host and a worker on each of others,
    with TLS certificates naming every host's address, as an operator would
    set it up with `ringmaster certs init` and the daemons' flags."""

    def __init__(self, hosts, root, coordinator_host=0, worker_hosts=(1, 2), slots=1,
                 coordinator_flags=(), worker_flags=(), flags_of_host=None):
        if os.path.realpath(root).startswith(("/tmp/", "/dev/shm/")):
            raise ValueError(f"{root}: each simulated host has a /tmp and /dev/shm of its own; "
                             "the cluster's files must be where every host sees them")
        self.hosts = hosts
        self.root = root
        self.bins = bin_dir()
        self.coordinator_host = coordinator_host
        self.worker_hosts = list(worker_hosts)
        self.slots = slots
        self.coordinator_flags = list(coordinator_flags)
        self.worker_flags = list(worker_flags)
        self.flags_of_host = dict(flags_of_host or {})  # a worker's own, by host
        self.address = f"{hosts.address(coordinator_host)}:{COORDINATOR_PORT}"
        self.tls_dir = os.path.join(root, "tls")
        self.coordinator = None
        self.workers = {}
        os.makedirs(os.path.join(root, "logs"), exist_ok=True)

    def worker_id(self, host):
        return self.hosts.hostname(host)

    def env(self):
        return dict(os.environ, RINGMASTER_COORDINATOR=self.address,
                    RINGMASTER_TLS_DIR=self.tls_dir)

    def _spawn(self, host, argv, log_name):
        with open(os.path.join(self.root, "logs", log_name), "ab") as log:
            return self.hosts.popen(host, argv, stdout=log, stderr=subprocess.STDOUT,
                                    env=self.env())

    def start(self, timeout=60, in_order=False):
        """Certificates, the coordinator, then the workers; `in_order`: each
        worker registered before the next starts (ranks are placed in
        registration order)."""
        certs = [f"{self.bins}/client/ringmaster", "certs", "init", "--dir", self.tls_dir]
        for i in range(self.hosts.count):
            certs += ["--host", self.hosts.address(i), "--host", self.hosts.hostname(i)]
        for h in self.worker_hosts:
            certs += ["--worker", self.worker_id(h)]
        subprocess.run(certs, check=True, capture_output=True)
        self.start_coordinator(timeout)
        for h in self.worker_hosts:
            self.start_worker(h)
            if in_order:
                self.wait_workers_alive([h], timeout)
        self.wait_workers_alive(self.worker_hosts, timeout)
        return self

    def start_coordinator(self, timeout=60):
        host = self.coordinator_host
        self.coordinator = self._spawn(host, [
            f"{self.bins}/coordinator/ringmaster-coordinator",
            "--bind", self.hosts.address(host), "--port", str(COORDINATOR_PORT),
            "--metrics-port", str(COORDINATOR_METRICS_PORT), "--advertise-address", self.address,
            "--state-dir", os.path.join(self.root, "coordinator"), "--tls-dir", self.tls_dir,
            # Jobs keep checkpoints anywhere in the suite's directory (shared
            # storage, a directory missing on the hosts).
            "--checkpoint-roots", self.root,
        ] + self.coordinator_flags, "coordinator.log")
        wait_for(lambda: self.cli("workers", check=False).returncode == 0, timeout,
                 "the coordinator answers")

    def start_worker(self, host):
        address = self.hosts.address(host)
        self.workers[host] = self._spawn(host, [
            f"{self.bins}/worker/ringmaster-worker", "--coordinator", self.workers_reach(),
            "--bind", address, "--port", str(WORKER_PORT),
            "--metrics-port", str(WORKER_METRICS_PORT),
            "--id", self.worker_id(host), "--slots", str(self.slots),
            "--state-dir", os.path.join(self.root, f"worker-{host}"),
            "--tls-dir", self.tls_dir,
            "--trainer-bin", f"{self.bins}/trainer/ringmaster-trainer",
            # Ranks run as whoever runs the suite: the trainer lives in its
            # build tree, which another user may not read.
            "--rank-user", "root",
        ] + self.worker_flags + list(self.flags_of_host.get(host, ())), f"worker-{host}.log")

    def workers_reach(self):
        """What workers are given as --coordinator."""
        return self.address

    def stop(self):
        """Workers first (they stop their ranks), then the coordinator."""
        for proc in list(self.workers.values()) + [self.coordinator]:
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def cli(self, *args, host=None, cwd=None, check=True, timeout=120, input=None):
        """`ringmaster ARGS` from this process, or from simulated `host`."""
        argv = [f"{self.bins}/client/ringmaster", "--coordinator", self.address, *args]
        if host is None:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                               cwd=cwd, env=self.env(), input=input)
        else:
            r = self.hosts.run(host, argv, cwd=cwd, timeout=timeout, env=self.env(),
                               input=input)
        if check and r.returncode != 0:
            raise RuntimeError(f"ringmaster {' '.join(args)}: exit {r.returncode}: {r.stderr}")
        return r

    def submit(self, yaml_text, name="job", host=None, cwd=None, extra=()):
        path = os.path.join(cwd or self.root, f"{name}.yaml")
        if host is None:
            with open(path, "w") as f:
                f.write(yaml_text)
        else:
            self.hosts.run(host, ["sh", "-c", 'cat > "$0"', path], input=yaml_text, check=True)
        return self.cli("submit", path, *extra, host=host, cwd=cwd).stdout.strip()

