"""``python -m localkube.nodeagent --node NAME --kubeconfig PATH ...``"""

from localkube.nodeagent.main import main

main()
