"""The DataVolume controller: CDI's DataVolumes filled through a claim and a worker pod
(`controller.py` does I/O, `logic.py` decides, `pods.py` writes the bodies, `csiclone.py`
says whether the CSI driver clones)."""
