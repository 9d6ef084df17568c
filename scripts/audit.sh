#!/usr/bin/env bash
# Dependency audit with pip-audit against PyPI's advisory data.
# Fails when a known vulnerability is found. When the advisory service cannot be reached
# (a network that only mirrors the package index), it says so plainly: nothing audited.
set -euo pipefail
cd "$(dirname "$0")/.."
report=$(.venv/bin/pip-audit --progress-spinner off -f json 2>/dev/null || true)
python3 - "$report" <<'PY'
import json
import sys

try:
    data = json.loads(sys.argv[1])
except ValueError:
    print("pip-audit: no report (the advisory service did not answer); nothing audited")
    sys.exit(0)
deps = data.get("dependencies", [])
vulnerable = [d for d in deps if d.get("vulns")]
skipped = [d for d in deps if d.get("skip_reason")]
for dep in vulnerable:
    for vuln in dep["vulns"]:
        print(f"VULNERABLE {dep['name']} {dep['version']}: {vuln['id']} fixed in {vuln.get('fix_versions')}")
audited = len(deps) - len(skipped)
print(f"pip-audit: {audited} of {len(deps)} packages audited, {len(vulnerable)} vulnerable, "
      f"{len(skipped)} not found on the advisory service")
sys.exit(1 if vulnerable else 0)
PY
