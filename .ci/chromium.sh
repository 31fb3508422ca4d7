# Headless Chromium and chromedriver for the status page's browser test
# (crates/hodoflow-send/tests/page.rs), sourced by .ci/run:
#
#   . .ci/chromium.sh && install_chromium
#
# installs Debian's `chromium` and `chromium-driver` when chromedriver is absent, and exports
# CI_REQUIRES_CHROMIUM=1, so the test fails instead of skipping when they are missing. The test
# starts chromedriver itself on a free loopback port, with a fresh profile in a temp dir.

install_chromium() {
  if ! command -v chromedriver >/dev/null || ! command -v chromium >/dev/null; then
    echo "== installing Chromium (apt-get install chromium chromium-driver)"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
      command -v sudo >/dev/null || { echo "Chromium is not installed, and installing it needs root (or sudo)" >&2; return 1; }
      sudo=(sudo)
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
    command -v chromedriver >/dev/null || { echo "apt-get installed chromium-driver, but no chromedriver on the PATH" >&2; return 1; }
  fi
  export CI_REQUIRES_CHROMIUM=1
}
