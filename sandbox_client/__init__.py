"""sandbox_client: the SBX/1 client, sandbox providers and the local sandbox server."""
