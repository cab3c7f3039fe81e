"""A small typed Kubernetes REST client (sync over httpx, async over aiohttp), and kubeconfig reading/writing.

The one boundary where HTTP errors from the API server become ``cluster.errors.ApiError`` subclasses.
"""

__all__ = ["client", "credentials", "http", "httpserver", "kubeconfig", "restmapper", "web"]
