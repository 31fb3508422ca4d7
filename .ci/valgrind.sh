# valgrind, whose callgrind counts the instructions of a delivery in the overhead benchmarks'
# smoke runs (crates/hodoflow-bench/tests/scenarios.rs), sourced by .ci/run:
#
#   . .ci/valgrind.sh && install_valgrind
#
# installs Debian's `valgrind` when absent, and exports CI_REQUIRES_VALGRIND=1, so the tests
# fail instead of reporting the instructions uncounted when it is missing.

install_valgrind() {
  if ! command -v valgrind >/dev/null; then
    echo "== installing valgrind (apt-get install valgrind)"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
      command -v sudo >/dev/null || { echo "valgrind is not installed, and installing it needs root (or sudo)" >&2; return 1; }
      sudo=(sudo)
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind >/dev/null
    command -v valgrind >/dev/null || { echo "apt-get installed valgrind, but it is not on the PATH" >&2; return 1; }
  fi
  export CI_REQUIRES_VALGRIND=1
}
