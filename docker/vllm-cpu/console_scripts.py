"""Write /opt/venv/bin's console scripts (`vllm`, `hf`, ...) for packages that arrived as a copied site-packages
(docker/images.sh, from the host's .venv-vllm) rather than through pip, which writes them at install time.
pip's own script: the entry point runs under `if __name__ == "__main__"` only, since a process vLLM starts with
multiprocessing's spawn method imports the main module again (without the guard, `vllm serve` died at its engine's
start: "An attempt has been made to start a new process before the current process has finished its
bootstrapping phase")."""

import sys
from importlib.metadata import distributions
from pathlib import Path

BIN = Path(sys.prefix) / "bin"
SCRIPT = """#!{python}
import re
import sys
from {module} import {name}
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit({call}())
"""
for dist in distributions():
    for ep in dist.entry_points.select(group="console_scripts"):
        script = BIN / ep.name
        script.write_text(
            SCRIPT.format(python=BIN / "python3", module=ep.module, name=ep.attr.split(".")[0], call=ep.attr)
        )
        script.chmod(0o755)
