"""The helpers a notebook uses to show something: a state taken apart and a labelled transcript
(`peek`), the filesystem sandbox tried in a child (`jail`), the replay race (`replay_race`), a
legacy SDK session (`legacy_sdk`) and the SDK comparison (`sdk_compare`). Notebooks import these
names through `labkit.course`. Imports nothing.
"""
