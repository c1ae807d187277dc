"""Quantization methods as plugins: each module here defines one or more `QuantMethod`s (settings,
keys, validation, how a policy is quantized and sized) and lists them in `METHODS`.

Adding a method is adding files: a module here, found by the registry (`quarl.config.method_registry`), and
`conf/quant/<name>.yaml` selecting `/schema/quant/<name>` (docs/methods.md). Nothing imports these
modules but the registry.
"""
