# Headless Chromium and chromedriver for the status page's browser test
# (crates/hodoflow-send/tests/page.rs), sourced by .ci/run:
#
#   . .ci/chromium.sh && install_chromium
#
# installs Debian's `chromium` and `chromium-driver` when chromedriver is absent, and exports
# CI_REQUIRES_CHROMIUM=1, so the test fails instead of skipping when they are missing. The test
# starts chromedriver itself on a free loopback port, with a fresh profile in a temp dir.

# shellcheck source=.ci/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

install_chromium() {
  if ! command -v chromedriver >/dev/null || ! command -v chromium >/dev/null; then
    apt_install Chromium chromium chromium-driver || return 1
    command -v chromedriver >/dev/null || { echo "apt-get installed chromium-driver, but no chromedriver on the PATH" >&2; return 1; }
  fi
  export CI_REQUIRES_CHROMIUM=1
}
