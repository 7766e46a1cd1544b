"""The node agent: a kubelet stand-in that runs a node's pods as local processes."""
