"""virt-api: KubeVirt's API front, served by the controller replicas.

- `subresources/`: the aggregated API (subresources.kubevirt.io): VM and VMI actions, console,
  VNC, port-forward, guest-agent queries, expand-spec; authenticated by the front proxy,
  authorised by SubjectAccessReviews, forwarded to the node's virt-handler.
- `admission/`: the mutating and validating webhooks (defaults, refusals naming the field)
  and the pods/eviction webhook.

It imports `shared` only, never the controller: what both need (labels, instancetype
expansion, revisions, eviction rules) lives in `shared/`.
"""
