"""Subcommands that live in their own modules (collectors, importers, services).

`app.commands.registry` imports them all and adds them to the `gpuledger` group. This package
itself imports nothing, so importing one command module (the API's `app.commands.job`,
`python -m app.commands.prometheus`) does not load the others.
"""
