#!/bin/sh
# Same role as BerriAI/litellm docker/prod_entrypoint.sh: the arguments go to the `litellm` CLI.
exec litellm "$@"
