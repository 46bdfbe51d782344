"""dynexpr.artifacts — specialisations built ahead of time and shipped (issue 15):

    record.py      what a new entry leaves in the cache's index, and DYNEXPR_RECORD
    manifest.py    the manifest of specialisations (TOML)
    specs.py       guards and arguments in a portable form; a call's diff to an entry
    isa.py         named ISA levels (DYNEXPR_ISA) instead of -march=native
    precompile.py  python -m dynexpr precompile MANIFEST -o BUNDLE (jobs in worker.py)
    bundle.py      the bundle: writing, verifying (sha256, HMAC), loading (Note [bundles])
    cli.py         python -m dynexpr cache ls | info | clear | why-miss
"""
