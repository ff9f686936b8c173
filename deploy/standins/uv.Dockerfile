# Stand-in for ghcr.io/astral-sh/uv:<version>: the uv and uvx binaries of PyPI's wheel of the
# same version at /, where the official image has them.
FROM scratch
COPY uv uvx /
ENTRYPOINT ["/uv"]
