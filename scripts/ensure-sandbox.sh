#!/usr/bin/env bash
# Debian's bubblewrap, the sandbox local executors run in (README: What the embedded default
# isolates). Without it the control plane still runs, without the sandbox, and says so.
set -uo pipefail

if [ ! -x /usr/bin/bwrap ]; then
  echo "installing Debian's bubblewrap (the executors' sandbox)" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq bubblewrap >/dev/null; } ||
    echo "could not install bubblewrap: executors will run without a sandbox" >&2
fi
exit 0
