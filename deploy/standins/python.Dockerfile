# Stand-in for python:3.11.11-slim-bookworm (scripts/docker-standins.sh; users pull the real one).
# Debian's python3 (3.11.x) under the official image's paths, trusting the extra certificate
# authorities of the machine that builds it (copied into ./ca by the script), so that `uv sync`
# inside an image build verifies TLS the way it does on that machine.
FROM debian:bookworm-slim
COPY ca/ /usr/local/share/ca-certificates/
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv ca-certificates \
 && update-ca-certificates \
 && for name in python python3 python3.11; do ln -s /usr/bin/python3.11 /usr/local/bin/$name; done \
 && rm -rf /var/lib/apt/lists/*
ENV LANG=C.UTF-8 SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt UV_NATIVE_TLS=1
CMD ["python3"]
