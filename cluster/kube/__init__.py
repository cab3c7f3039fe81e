"""A small typed Kubernetes REST client (sync and async) over httpx, and kubeconfig reading/writing.

The one boundary where HTTP errors from the API server become ``cluster.errors.ApiError`` subclasses.
"""
