#!/usr/bin/env bash
# What the test suite needs beyond Python packages: a PostgreSQL server on 127.0.0.1:5432 that
# accepts user postgres without a password (the tests create and drop their own databases), and
# Debian's chromium for the browser tests (Playwright drives /usr/bin/chromium; it cannot
# download a browser of its own here).
set -euo pipefail

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

if ! pg_up; then
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    version=$(ls /etc/postgresql | sort -n | tail -n 1)
    echo "starting PostgreSQL $version" >&2
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  fi
  for _ in $(seq 1 60); do pg_up && break; sleep 0.5; done
fi
if ! pg_up; then
  echo "PostgreSQL is not reachable on 127.0.0.1:5432; the suite runs against it too. See README: Testing." >&2
  exit 1
fi

# Debian packages the tests use: bubblewrap for the executors' sandbox (the isolation test runs
# with it), chromium for the browser tests; curl and jq because the
# documentation's commands are run verbatim.
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/bwrap ] || missing+=(bubblewrap)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v jq >/dev/null 2>&1 || missing+=(jq)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages for the tests: ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ! -x /usr/bin/chromium ]; then
  echo "chromium is not installed at /usr/bin/chromium; the browser tests need it (apt-get install chromium)." >&2
  exit 1
fi
