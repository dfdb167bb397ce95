"""models.yml -> validated plan -> compose stack, LiteLLM config and local runtime.

Kept import-free on purpose: `generator.compile.load.catalog_build` and `generator.demo` run under the
vLLM interpreter, which does not have the generator's own dependencies.
"""
