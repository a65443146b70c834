"""Novel-API discovery: install two versions of a library in their own virtualenvs, list each one's
public API from inside its environment (`introspect.py`, standard library only), and keep what the
newer version added, minus what a benchmark cannot use (private, deprecated, sourceless, undocumented).
`discover.discover` writes `apis.jsonl` (one row per added API, kept or filtered) and `discovery.json`."""
