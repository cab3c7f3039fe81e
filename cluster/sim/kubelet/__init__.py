"""The simulated nodes' kubelet endpoint (what the API server calls for ``kubectl logs``) and the containers' logs.

``logstore`` keeps each container's output as a kubelet does, ``logquery`` answers a log request with the
kubelet's semantics, ``server`` serves both over HTTPS for every simulated node. Nothing here places, starts or
stops a pod: the pod agent does that and writes its containers' lines through ``logstore``.
"""
