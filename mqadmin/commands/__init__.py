"""One module per mqadmin command family; each exposes ``app`` (a Typer app holding its commands)."""
