"""The local cluster's CSI stack (test bed, not the product): a small CSI driver of the
project's own plus Kubernetes' own sidecars. See docs/csi.md."""
