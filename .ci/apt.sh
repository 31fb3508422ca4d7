# Installs Debian packages for .ci/run's helpers (postgres.sh, chromium.sh, valgrind.sh):
#
#   . .ci/apt.sh && apt_install "what it is for" package...
#
# as root, or through sudo; fails with a sentence when neither is at hand.

apt_install() {
  local what=$1 sudo=()
  shift
  echo "== installing $what (apt-get install $*)"
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "$what is not installed, and installing it needs root (or sudo)" >&2; return 1; }
    sudo=(sudo)
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
