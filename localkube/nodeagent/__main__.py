"""``python -m localkube.nodeagent --node NAME --kubeconfig PATH ...``

gRPC's fork handlers (on by default) restart its threads in a forked child, where they
can crash (SIGSEGV, exit 139) before the child execs. The agent forks for every container
it starts, so they are switched off before anything loads gRPC.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from localkube.nodeagent.main import main

main()
