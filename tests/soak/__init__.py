"""The chaos soak: a big batch on the local stack while faults are injected, then the invariant checker.

    make soak [SEED=...]        # python -m soak --seed ... (PYTHONPATH=tests), about 5-10 minutes
    tests/e2e/test_soak_short.py   # the short variant `make test` runs (~200 PDFs, fewer faults)

proxy.py   the TCP proxy between the functions and MariaDB/Redis (cut, refuse, latency)
corpus.py  the generated ZIPs and the oracle (which user each PDF names, what each upload held)
chaos.py   the seeded fault plan and the injectors (kill function processes, cut, duplicate, re-upload,
           odd drops, a tenant's flood of empty batches, slow and silent callback receivers)
receivers.py  callback receivers: an honest one (verifies, times arrivals), a trickling one, a silent one
run.py     the stack, the run, the wait and the check; __main__.py its command line
"""
