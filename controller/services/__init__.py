"""Services the controllers share, as KubeVirt's `services/`: the launcher pod template,
its scheduling fields, memory overhead, and one module per volume source."""
