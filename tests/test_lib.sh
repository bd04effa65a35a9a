# Sourced by the shell tests: how they skip, fail and find a port.
skip() { echo "SKIPPED: $*"; exit 0; }
fail() { echo "FAIL: $*"; exit 1; }
# A TCP port free on every address of this host (when asked).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}
