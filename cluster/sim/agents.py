"""Every simulated agent of a lab cluster in one process: the node agent, the pod agent, the nodes' kubelet
endpoint and the GPU stack.

``python -m cluster.sim.agents --kubeconfig K --fleet F --device-checkpoint C`` runs them on one asyncio
loop; with ``--kubelet-port``, ``--kubelet-pki`` and ``--client-ca`` each node's kubelet endpoint listens on its
InternalIP (``cluster.sim.kubelet.server``), serving the containers' logs that the pod agent keeps under
``--pod-logs``. Each keeps its own API client and informers (the GPU stack also runs alone, as
``cluster.sim.gpu.stack``, on kind), so one process saves two Python interpreters and their imported libraries:
about 95 MiB of a lab cluster's resident memory (issue 17, `gpulab bench`).

The node agent goes first, so the nodes are registered the moment the API server is ready; the pod agent and
the GPU stack start once it has registered them. If any of the three stops with an error, the process exits and
`gpulab up` starts it again; nothing is lost, since the cluster's state is in the API server and the device
checkpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import resource
from pathlib import Path

from cluster import fleet as fleet_mod, settings
from cluster.kube import kubeconfig
from cluster.kube.client import AsyncClient
from cluster.sim import node_agent, runner

# The pod agent's and the GPU stack's modules (the GPU stack imports most of cluster.gpu) are imported once the
# nodes are registered: on two cores their import time would otherwise delay every node's registration.

log = logging.getLogger("gpulab.agents")


async def _main(args: argparse.Namespace) -> None:
    conn = kubeconfig.load(args.kubeconfig)
    device_checkpoint = Path(args.device_checkpoint) if args.device_checkpoint else None
    node_client = AsyncClient(conn, max_connections=32)
    await runner.retry_until_api(node_client)
    fl = fleet_mod.load(args.fleet)
    nodes = node_agent.NodeAgent(node_client, fl, args.lease_seconds, args.renew_every, args.kubelet_port)
    await nodes.register_all()
    from cluster.sim import admission, checkpoint, nodes as nodes_mod, pod_agent
    from cluster.sim.gpu import stack
    from cluster.sim.kubelet import logstore, server
    logs = logstore.LogStore(Path(args.pod_logs)) if args.pod_logs else None
    pods = pod_agent.PodAgent(AsyncClient(conn), admission.load_hooks(args.hooks or settings.current().admission_hooks),
                              checkpoint.DeviceCheckpoint(device_checkpoint), logs)
    gpus = stack.Stack(AsyncClient(conn, max_connections=48), device_checkpoint, logs=logs)  # the MIG manager's log
    running = [nodes.keep_ready(), pods.run(), gpus.run()]
    if logs is not None and args.kubelet_pki and args.client_ca:
        kubelets = server.KubeletServer(pods.pod_informer.cache, logs, port=args.kubelet_port,
                                        pki_dir=Path(args.kubelet_pki), client_ca=Path(args.client_ca),
                                        nodes=pods.node_informer.cache, devices=pods.devices)
        running.append(kubelets.run(nodes_mod.plan_addresses(fl)))
    await asyncio.gather(*running)


def _raise_open_file_limit() -> None:
    """Every node's kubelet endpoint holds a listening socket: a 1,000-node fleet needs more than the usual soft
    limit of 1,024 descriptors. Raise it to the hard limit, as every Go program (the real kubelet too) does at start
    since Go 1.19 (https://go.dev/doc/go1.19#runtime)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d: %s", soft, exc)


def main() -> None:
    settings.establish(settings.Settings.from_env(os.environ))  # the entry point: GPULAB_* read once, here
    _raise_open_file_limit()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--fleet", required=True)
    parser.add_argument("--lease-seconds", type=int, default=40)
    parser.add_argument("--renew-every", type=float, default=10.0)
    parser.add_argument("--hooks", default=None,
                        help="comma-separated module:function admission hooks of the pod agent (default: as "
                        "cluster.sim.pod_agent)")
    parser.add_argument("--device-checkpoint", default="",
                        help="the device-manager checkpoint file (default: kept in memory only)")
    parser.add_argument("--kubelet-port", type=int, default=10250,
                        help="the port of every node's kubelet endpoint (on the node's InternalIP)")
    parser.add_argument("--kubelet-pki", default="",
                        help="folder of the nodes' kubelet serving certificates, <node>.pem (default: no endpoint)")
    parser.add_argument("--client-ca", default="", help="the CA whose client certificates the kubelets verify")
    parser.add_argument("--pod-logs", default="",
                        help="folder of the containers' logs (default: none kept, no kubelet endpoint)")
    runner.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
