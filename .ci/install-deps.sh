#!/usr/bin/env bash
# Install the Debian packages the test suite's real services need (idempotent: packages that are
# already installed are skipped, so this is quick after the first run). Needs root and apt.
set -euo pipefail

# python3-venv: the Makefile's virtual environment.
# Add a package here when a test starts a new real service.
# slurm-wlm slurmdbd mariadb-server munge: tests/slurm_live (a real Slurm 22.05 with accounting,
# started by tests/infra/slurm/start_slurm.sh; passwd gives it useradd; tzdata a non-UTC zone).
PACKAGES=(python3-venv)
PACKAGES+=(slurm-wlm slurmdbd mariadb-server mariadb-client munge passwd tzdata)
# prometheus: tests/prometheus starts Prometheus 2.42 and uses its promtool (backfill).
PACKAGES+=(prometheus)
# chromium: the dashboard's real-browser test and the weekly report's HTML → PDF (--print-to-pdf);
# fonts-dejavu-core so pages and PDFs have glyphs. poppler-utils: pdftoppm for PDF checks.
PACKAGES+=(chromium fonts-dejavu-core poppler-utils)
# default-jre-headless (Java 17): PySpark local mode for `attribute --engine spark` parity tests.
PACKAGES+=(default-jre-headless)
# jq: the Kueue recommendations' apply line (kubectl get … | jq … | kubectl replace) is run on a
# recorded ClusterQueue by tests/detectors/recommend/test_replayed_kueue.py.
PACKAGES+=(jq)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "install-deps: missing Debian packages: ${missing[*]} (run as root on Debian, or install them)" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
