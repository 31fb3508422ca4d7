# valgrind, whose callgrind counts the instructions of a delivery in the overhead benchmarks'
# smoke runs (crates/hodoflow-bench/tests/scenarios.rs), sourced by .ci/run:
#
#   . .ci/valgrind.sh && install_valgrind
#
# installs Debian's `valgrind` when absent, and exports CI_REQUIRES_VALGRIND=1, so the tests
# fail instead of reporting the instructions uncounted when it is missing.

# shellcheck source=.ci/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

install_valgrind() {
  if ! command -v valgrind >/dev/null; then
    apt_install valgrind valgrind || return 1
    command -v valgrind >/dev/null || { echo "apt-get installed valgrind, but it is not on the PATH" >&2; return 1; }
  fi
  export CI_REQUIRES_VALGRIND=1
}
