"""Other XLA releases: their environments (`envs`), a standalone runner executed by their
interpreters (`runner`), and release bisection (`bisection`, `commands`)."""
