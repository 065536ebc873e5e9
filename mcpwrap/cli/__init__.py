"""The face: argv -> one plain function per verb -> exit code."""


def entry() -> None:
    """The `mcpwrap` command (the console script and `python -m mcpwrap`): the CLI's modules load
    with the cyclic collector off (they live until exit and hold no garbage: a collection pass over
    them frees nothing, and `serve` answers its first request sooner without one); `main` freezes
    them and turns the collector back on before the verb runs."""
    import gc

    gc.disable()
    from mcpwrap.cli.main import entry as run

    run()
