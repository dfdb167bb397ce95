"""Write /opt/venv/bin's console scripts (`vllm`, `hf`, ...) for packages that arrived as a copied site-packages
(docker/images.sh, from the host's .venv-vllm) rather than through pip, which writes them at install time.
Same script as pip's: import the entry point, exit with what it returns."""

import sys
from importlib.metadata import distributions
from pathlib import Path

BIN = Path(sys.prefix) / "bin"
for dist in distributions():
    for ep in dist.entry_points.select(group="console_scripts"):
        script = BIN / ep.name
        script.write_text(f"#!{BIN}/python3\nimport sys\nfrom {ep.module} import {ep.attr.split('.')[0]}\n"
                          f"sys.exit({ep.attr}())\n")
        script.chmod(0o755)
