"""The playbook runner (issue 15): YAML files of idempotent operations over the Admin interface,
on store directories, clusters and SSH hosts. Entry point: ``mqadmin playbook run|check``."""
