#!/usr/bin/env python3
"""`systemctl` for a machine without systemd running (a simulated host of
the tests): `start UNIT` runs the ExecStart of /etc/systemd/system/UNIT as
systemd would run that command line, in the background, and returns:

- as its User= and Group=, with its AmbientCapabilities= (and as many
  inheritable) and NoNewPrivileges=, through setpriv;
- with the environment of its Environment= and EnvironmentFile= lines, and
  ExecStart's ${VAR} and $VAR expanded from it, %H and %% as systemd does;
- after making its StateDirectory= below /var/lib, the user's, with its
  StateDirectoryMode=.

`reload UNIT` runs its ExecReload= with $MAINPID the process `start`
started (as root, as systemd runs it), and fails as systemctl does when
the unit has none. `stop UNIT` sends that process its KillSignal= (SIGTERM)
and, after TimeoutStopSec= (90 s), SIGKILL, and waits for it to end;
`restart UNIT` is stop, then start.

The sandboxing directives (ProtectSystem= and the like) are left out.
Output goes to $UNIT_LOG_DIR/<host name>-<unit>.log, the main pid to .pid
beside it. Other verbs (enable, daemon-reload) do nothing here: they
prepare what systemd would start.
"""
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

UNIT_DIR = os.environ.get("UNIT_DIR", "/etc/systemd/system")


def read_unit(path):
    """[Service] directives: {name: [value, ...]}, continuation lines joined."""
    directives = {}
    section = None
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]" and "=" in line:
            name, value = line.split("=", 1)
            directives.setdefault(name.strip(), []).append(value.strip())
    return directives


def specifiers(value):
    return re.sub(r"%[H%]", lambda m: socket.gethostname() if m.group(0) == "%H" else "%",
                  value)


def environment(directives):
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "LANG": "C.UTF-8"}
    for line in directives.get("Environment", []):
        for assignment in shlex.split(specifiers(line)):
            name, _, value = assignment.partition("=")
            env[name] = value
    for path in directives.get("EnvironmentFile", []):
        optional = path.startswith("-")
        path = path.lstrip("-")
        if not os.path.exists(path):
            if optional:
                continue
            sys.exit(f"systemctl: {path} does not exist")
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    name, _, value = line.partition("=")
                    env[name.strip()] = value.strip().strip('"')
    return env


def command_line(exec_start, env):
    """ExecStart's words: ${VAR} inside a word, $VAR alone as a word split
    on white space, as systemd expands them."""
    words = []
    for word in shlex.split(specifiers(exec_start)):
        if re.fullmatch(r"\$[A-Za-z_]\w*", word):
            words += env.get(word[1:], "").split()
        else:
            words.append(re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), word))
    return words


def start(unit, log_dir):
    directives = read_unit(os.path.join(UNIT_DIR, unit))
    env = environment(directives)
    argv = command_line(directives["ExecStart"][-1], env)
    user = directives.get("User", ["root"])[-1]
    group = directives.get("Group", [user])[-1]
    for name in directives.get("StateDirectory", []):
        path = os.path.join("/var/lib", name)
        os.makedirs(path, exist_ok=True)
        subprocess.run(["chown", f"{user}:{group}", path], check=True)
        os.chmod(path, int(directives.get("StateDirectoryMode", ["0755"])[-1], 8))
    prefix = ["setpriv", f"--reuid={user}", f"--regid={group}", "--init-groups"]
    caps = [c.lower().replace("cap_", "+")
            for line in directives.get("AmbientCapabilities", []) for c in line.split()]
    if caps:
        prefix += [f"--inh-caps={','.join(caps)}", f"--ambient-caps={','.join(caps)}"]
    if directives.get("NoNewPrivileges", ["no"])[-1] == "yes":
        prefix.append("--no-new-privs")
    log = os.path.join(log_dir, f"{socket.gethostname()}-{unit}.log")
    with open(log, "ab") as out:
        process = subprocess.Popen(prefix + argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True, cwd="/")
    with open(os.path.join(log_dir, f"{socket.gethostname()}-{unit}.pid"), "w") as f:
        f.write(f"{process.pid}\n")  # setpriv execs the command: the main pid
    print(f"started {unit}: {' '.join(argv)}")


def reload(unit, log_dir):
    directives = read_unit(os.path.join(UNIT_DIR, unit))
    if "ExecReload" not in directives:
        sys.exit(f"Failed to reload {unit}: Job type reload is not applicable for unit {unit}.")
    with open(os.path.join(log_dir, f"{socket.gethostname()}-{unit}.pid")) as f:
        env = dict(environment(directives), MAINPID=f.read().strip())
    for line in directives["ExecReload"]:
        subprocess.run(command_line(line, env), env=env, check=True)
    print(f"reloaded {unit}")


def main_pid(unit, log_dir):
    """The pid `start` started, or None when it is not running."""
    try:
        with open(os.path.join(log_dir, f"{socket.gethostname()}-{unit}.pid")) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    with open(f"/proc/{pid}/stat") as f:
        return None if f.read().rsplit(")", 1)[1].split()[0] == "Z" else pid


def stop(unit, log_dir):
    directives = read_unit(os.path.join(UNIT_DIR, unit))
    pid = main_pid(unit, log_dir)
    if pid is None:
        return
    name = directives.get("KillSignal", ["SIGTERM"])[-1]
    timeout = float(directives.get("TimeoutStopSec", ["90"])[-1].rstrip("s"))
    os.kill(pid, getattr(signal, name))
    deadline = time.monotonic() + timeout
    while main_pid(unit, log_dir) is not None:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(0.1)
    print(f"stopped {unit}")


def restart(unit, log_dir):
    stop(unit, log_dir)
    start(unit, log_dir)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    verbs = {"start": start, "reload": reload, "stop": stop, "restart": restart}
    if len(args) >= 2 and args[0] in verbs:
        for unit in args[1:]:
            verbs[args[0]](unit if unit.endswith(".service") else unit + ".service",
                           os.environ.get("UNIT_LOG_DIR", "/tmp"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
