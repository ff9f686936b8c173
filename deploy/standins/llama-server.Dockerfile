# Stand-in for ghcr.io/ggml-org/llama.cpp:server-<tag>: the llama-server binary that
# scripts/llama-server.sh builds from llama.cpp's source, at the official image's path, with
# the official image's entry point, listening address and curl for its healthcheck.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgomp1 libstdc++6 curl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY llama-server /app/llama-server
ENV LLAMA_ARG_HOST=0.0.0.0
WORKDIR /app
HEALTHCHECK CMD ["curl", "-f", "http://localhost:8080/health"]
ENTRYPOINT ["/app/llama-server"]
