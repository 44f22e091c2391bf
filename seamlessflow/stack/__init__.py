"""Running the stack: what `seamlessflow up` starts (`services`: one spec per service, from the stack
defaults merged with the user's config), the process supervisor that places those specs on this machine
(`supervisor`), and what the running stack looks like (`status`, `rows`, `watch`). The CLI (`cli/stack.py`)
and the chaos run are thin layers over it; a second placement (a cluster engine) takes the same specs.
"""
