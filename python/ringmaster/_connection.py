"""How a client finds its coordinators and credentials, exactly as the CLI
does, and which coordinator it calls now (following the leader)."""
import ipaddress
import os
import stat
import threading
import warnings
from typing import Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import grpc

from ringmaster.errors import PermissionDenied, PlaintextTokenWarning, RingmasterError

DEFAULT_COORDINATOR = "127.0.0.1:7070"
# Only the coordinator's certificate names this: a worker's, signed by the
# same CA, cannot answer in its place.
COORDINATOR_NAME = "ringmaster-coordinator"
LEADER_IS_AT = "the leader is at "

Addresses = Union[str, Sequence[str], None]


class Tls(NamedTuple):
    ca: bytes
    cert: Optional[bytes]
    key: Optional[bytes]


class Connection(NamedTuple):
    """What a client found: the coordinators to call, TLS, the token."""
    addresses: Tuple[str, ...]
    tls: Optional[Tls]
    token: str

    def metadata(self) -> Tuple[Tuple[str, str], ...]:
        return (("authorization", "Bearer " + self.token),) if self.token else ()

    def channel(self, address: str, grpc_module):
        """A channel to `address` with this connection's TLS, made by
        `grpc_module`: grpc, or grpc.aio."""
        options: List[Tuple[str, object]] = [
            ("grpc.keepalive_time_ms", 10000),
            ("grpc.keepalive_timeout_ms", 5000),
            ("grpc.max_receive_message_length", 64 << 20),
        ]
        if self.tls is None:
            return grpc_module.insecure_channel(address, options=options)
        options.append(("grpc.ssl_target_name_override", COORDINATOR_NAME))
        credentials = grpc.ssl_channel_credentials(self.tls.ca, self.tls.key, self.tls.cert)
        return grpc_module.secure_channel(address, credentials, options=options)


def split_addresses(addresses: Addresses) -> Tuple[str, ...]:
    if addresses is None:
        addresses = os.environ.get("RINGMASTER_COORDINATOR") or DEFAULT_COORDINATOR
    if isinstance(addresses, str):
        addresses = addresses.split(",")
    found = tuple(a.strip() for a in addresses if a and a.strip())
    if not found:
        raise RingmasterError("no coordinator address given", "CLIENT")
    return found


def default_state_dir() -> str:
    """Where `ringmaster up` keeps a local cluster's state (its --state-dir
    default): $RINGMASTER_STATE_DIR, else $XDG_STATE_HOME/ringmaster, else
    (as root) /var/lib/ringmaster-local, else ~/.local/state/ringmaster."""
    if os.environ.get("RINGMASTER_STATE_DIR"):
        return os.environ["RINGMASTER_STATE_DIR"]
    if os.environ.get("XDG_STATE_HOME"):
        return os.path.join(os.environ["XDG_STATE_HOME"], "ringmaster")
    if os.geteuid() == 0:
        return "/var/lib/ringmaster-local"
    return os.path.join(os.environ.get("HOME", "/tmp"), ".local/state/ringmaster")


def _local_cluster_tls_dir(addresses: Iterable[str]) -> str:
    """The TLS files of the local cluster of `ringmaster up`, when one of
    `addresses` is its coordinator; else "" (plaintext)."""
    state = default_state_dir()
    tls = os.path.join(state, "tls")
    if not os.path.exists(os.path.join(tls, "ca.crt")):
        return ""
    try:
        with open(os.path.join(state, "cluster")) as f:
            daemons = [line.split() for line in f]
    except OSError:
        return ""
    coordinators = {d[2] for d in daemons if len(d) >= 4 and d[0] == "coordinator"}
    return tls if coordinators & set(addresses) else ""


def check_secret_file_mode(path: str, what: str) -> None:
    """A secret (a token, a key) must be closed to others, and to its group
    unless root owns it and the group may only read it (a Kubernetes
    Secret's root:fsGroup 0440), as the CLI requires."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise PermissionDenied(f"{what} {path}: {e.strerror}", "CLIENT") from None
    if not stat.S_ISREG(st.st_mode):
        raise PermissionDenied(f"{what} {path} is not a regular file", "CLIENT")
    others = st.st_mode & 0o007
    group = st.st_mode & 0o070
    root_group_read_only = st.st_uid == 0 and (st.st_mode & 0o030) == 0
    if others or (group and not root_group_read_only):
        raise PermissionDenied(
            f"{what} {path} is open to group or others (mode {st.st_mode & 0o7777:04o}); "
            f"chmod 600 {path}", "CLIENT")


def _read(path: str, secret: bool = False) -> bytes:
    if secret:
        check_secret_file_mode(path, "TLS key")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise PermissionDenied(f"cannot read {path}: {e.strerror}", "CLIENT") from None


def _load_tls(directory: str, cert: Optional[str], no_cert: bool) -> Optional[Tls]:
    """The CA of `directory` and the client certificate to present: `cert`
    (a name, or user-<name>), else admin's unless `no_cert`."""
    if not directory:
        if cert:
            raise PermissionDenied(f"cert {cert}: no TLS directory to find it in (tls_dir)",
                                   "CLIENT")
        return None

    def exists(stem: str) -> bool:
        return os.path.exists(os.path.join(directory, stem + ".crt"))

    stem = ""
    if cert:
        stem = cert if exists(cert) else "user-" + cert
        if not exists(stem):
            raise PermissionDenied(
                f"cert {cert}: neither {cert}.crt nor user-{cert}.crt is in {directory}", "CLIENT")
    elif not no_cert and exists("admin"):
        stem = "admin"
    ca = _read(os.path.join(directory, "ca.crt"))
    if not stem:
        return Tls(ca, None, None)
    return Tls(ca, _read(os.path.join(directory, stem + ".crt")),
               _read(os.path.join(directory, stem + ".key"), secret=True))


def read_token(token: Optional[str], token_file: Optional[str]) -> str:
    if token:
        return token
    if token_file:
        check_secret_file_mode(token_file, "token file")
        with open(token_file) as f:
            text = f.read().strip()
        if not text:
            raise PermissionDenied(f"token file {token_file} is empty", "CLIENT")
        return text
    return os.environ.get("RINGMASTER_TOKEN", "")


def is_loopback(address: str) -> bool:
    """Whether `address` ("host:port", "[v6]:port") is this machine's
    loopback, as the CLI decides it."""
    host = address
    if host.startswith("["):
        host = host[1:host.find("]")]
    elif host.count(":") == 1:
        host = host.split(":")[0]
    if host in ("localhost", "::1"):
        return True
    try:  # an address, not a name that begins like one ("127.0.0.1.example.com")
        return ipaddress.IPv4Address(host).is_loopback
    except ValueError:
        return False


def discover(coordinator: Addresses = None, tls_dir: Optional[str] = None,
             token: Optional[str] = None, token_file: Optional[str] = None,
             cert: Optional[str] = None, insecure: bool = False) -> Connection:
    """As the CLI: the coordinator from `coordinator` (a list, or
    "a:7070,b:7070"), else $RINGMASTER_COORDINATOR, else 127.0.0.1:7070; the
    token from `token`, `token_file`, else $RINGMASTER_TOKEN; TLS from
    `tls_dir`, else $RINGMASTER_TLS_DIR, else the files of the local cluster
    of `ringmaster up` when it is that cluster's coordinator ("" speaks
    plaintext). The client certificate presented is `cert`, else none when
    a token is used, else the TLS directory's admin certificate.

    A token goes in plaintext only to loopback, unless `insecure` is true
    or `tls_dir` (or $RINGMASTER_TLS_DIR) is "" on purpose, and then with a
    PlaintextTokenWarning; else PermissionDenied, before anything is sent."""
    addresses = split_addresses(coordinator)
    found_token = read_token(token, token_file)
    if tls_dir is None:
        tls_dir = os.environ.get("RINGMASTER_TLS_DIR")
    plaintext_asked = tls_dir == ""
    if tls_dir is None:
        tls_dir = _local_cluster_tls_dir(addresses)
    no_cert = not cert and bool(found_token)
    if cert:
        found_token = ""
    tls = _load_tls(tls_dir, cert, no_cert)
    beyond = [a for a in addresses if not is_loopback(a)]
    if tls is None and found_token and beyond:
        where = ", ".join(beyond)
        if not (insecure or plaintext_asked):
            raise PermissionDenied(
                f"not sending the token in plaintext to {where}, beyond loopback: give tls_dir "
                f"with the cluster's CA (ca.crt), or insecure=True to send it anyway", "CLIENT")
        warnings.warn(f"the token goes in plaintext to {where}: anyone on the way can read it "
                      f"and act as you", PlaintextTokenWarning, stacklevel=3)
    return Connection(addresses, tls, found_token)


def leader_named_in(message: str) -> str:
    """The leader's address in a standby's refusal ("... the leader is at
    HOST:PORT"); "" when it names none."""
    at = message.find(LEADER_IS_AT)
    if at < 0:
        return ""
    rest = message[at + len(LEADER_IS_AT):]
    for i, c in enumerate(rest):
        if c in " ,;)":
            return rest[:i]
    return rest


class Targets:
    """Which coordinator to call now. After UNAVAILABLE (down, or a standby
    naming the leader), `follow` moves to the leader named or the next
    address. Calls carry credentials, so a leader named is followed only
    with `tls` (the channel checks that it is the coordinator) or when it
    is one of `addresses`. Thread-safe."""

    def __init__(self, addresses: Sequence[str], tls: bool = True) -> None:
        self.addresses = tuple(addresses)
        self._tls = tls
        self._lock = threading.Lock()
        self._current = self.addresses[0]
        self._misses = 0

    @property
    def several(self) -> bool:
        return len(self.addresses) > 1

    def current(self) -> str:
        with self._lock:
            return self._current

    def answered(self) -> None:
        with self._lock:
            self._misses = 0

    def follow(self, code: str, message: str, used: str, idempotent: bool) -> Optional[float]:
        """After a call to `used` failed: None when it should not be made
        again (its answer stands); else the pause (s) before making it
        again at the coordinator now current."""
        # A standby that turns leader, or stops, cancels the reads it was
        # serving: as with a paused coordinator, a read goes elsewhere.
        refused = code == "UNAVAILABLE" or (idempotent and self.several and
                                            code in ("DEADLINE_EXCEEDED", "CANCELLED"))
        leader = leader_named_in(message) if refused else ""
        if not self._tls and leader not in self.addresses:
            leader = ""
        if not refused or (not self.several and not leader):
            return None
        with self._lock:
            if self._current == used:  # not moved already by another call
                if leader and leader != used:
                    self._current = leader
                else:
                    i = self.addresses.index(used) if used in self.addresses else -1
                    self._current = self.addresses[(i + 1) % len(self.addresses)]
            self._misses += 1
            # A whole round without a leader: one is being elected.
            return 0.25 if self._misses % len(self.addresses) == 0 else 0.0
