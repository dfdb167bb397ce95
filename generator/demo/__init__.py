"""The scripted tiny models (a real vLLM serves them: no download) and the demo client: `make demo-models`,
`make demo`; parser_docs renders docs/parsers.md's matrix from the families. Runs under the vLLM interpreter too, so
it imports nothing of the generator's dependencies."""
