"""Instancetypes and preferences applied to a VM's VMI, as KubeVirt's pkg/instancetype
does: pure functions over wire dicts and the typed instancetype.kubevirt.io specs.

- `target`: the VMI spec being expanded, and where each value it got came from;
- `sizing`: the instancetype (vCPUs laid out by the preferred topology, memory and its
  overcommit, and the fields it owns: a template setting one of them is a conflict);
- `prefer`: the preference's defaults, each applied only where the template left it unset;
- `requirements`: the preference's requirements (KubeVirt's messages);
- `apply`: both, in KubeVirt's order, and the errors of a VMI made so, named after the
  instancetype or preference field that put each bad value there.
"""
