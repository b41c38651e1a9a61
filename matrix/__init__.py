"""The release matrix: every declared queue implementation against every property.

`python -m matrix` builds one isolated venv per library version (`envs`), runs the
machine on each implementation in a subprocess, excusing each violated property in
turn to find the next (`runs`), and writes `conformance.md` and `.json` (`report`).
The list of implementations is one declarative table (`targets`). Nothing here
imports an adapter: each runs only inside its own venv.
"""
