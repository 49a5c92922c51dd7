"""The session's sandbox as one step sees it: provisioned lazily, used by the tools."""
