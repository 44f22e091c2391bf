"""Running the stack: what `seamlessflow up` starts (`services`: one spec per service, from the stack
defaults merged with the user's config), the two placements behind one interface (`placement_protocol`, chosen in
`placement_choice`): the process supervisor on this machine (`supervisor`) and Ray (`ray_placement`), and what the
running stack looks like (`status`, `rows`, `watch`). The CLI (`cli/stack.py`) and the chaos run are thin
layers over it.
"""
