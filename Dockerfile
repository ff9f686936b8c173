# syntax=docker/dockerfile:1
# Every service's image, one stage each, built from the repository root:
#   docker build --target orchestrator .   (toolbroker, reports, snakelab, mcp-snakelab alike)
# compose.yaml and compose.demo.yaml name the targets. Each image installs one workspace package
# from the lockfile into /app/.venv (its <name>-venv stage), then copies only that venv into the
# runtime stage, which runs as the non-root user ax3l.

FROM python:3.11.11-slim-bookworm AS workspace
COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /usr/local/bin/uv
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /src
# The whole workspace is needed to resolve the lockfile; each venv stage installs one package
# and its dependencies.
COPY pyproject.toml uv.lock ./
COPY shared/ shared/
COPY services/ services/

FROM python:3.11.11-slim-bookworm AS runtime
RUN groupadd --system --gid 10001 ax3l && useradd --system --uid 10001 --gid ax3l --no-create-home ax3l
ENV PATH=/app/.venv/bin:$PATH PYTHONUNBUFFERED=1 AX3L_HTTP_HOST=0.0.0.0
WORKDIR /app

FROM workspace AS orchestrator-venv
RUN uv sync --frozen --no-dev --no-editable --no-cache --package ax3l-orchestrator

FROM runtime AS orchestrator
RUN install -d -o ax3l -g ax3l -m 0700 /run/ax3l-board
COPY --from=orchestrator-venv /app/.venv /app/.venv
USER ax3l
EXPOSE 28871
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=5 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:28871/health', timeout=3).status != 200)"]
CMD ["ax3l-orchestrator"]

FROM workspace AS toolbroker-venv
RUN uv sync --frozen --no-dev --no-editable --no-cache --package ax3l-toolbroker

FROM runtime AS toolbroker
COPY --from=toolbroker-venv /app/.venv /app/.venv
USER ax3l
EXPOSE 28872 61970
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=5 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:28872/health', timeout=3).status != 200)"]
CMD ["ax3l-toolbroker"]

FROM workspace AS reports-venv
RUN uv sync --frozen --no-dev --no-editable --no-cache --package ax3l-reports

FROM runtime AS reports
COPY --from=reports-venv /app/.venv /app/.venv
USER ax3l
EXPOSE 28870
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=5 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:28870/health', timeout=3).status != 200)"]
CMD ["ax3l-reports"]

FROM workspace AS snakelab-venv
RUN uv sync --frozen --no-dev --no-editable --no-cache --package ax3l-snakelab-ref

FROM runtime AS snakelab
COPY --from=snakelab-venv /app/.venv /app/.venv
USER ax3l
EXPOSE 41970 41972
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=5 \
  CMD ["python", "-m", "snakelab.healthcheck"]
CMD ["snakelab-server", "--address", "0.0.0.0", "--port", "41970"]

FROM workspace AS mcp-snakelab-venv
RUN uv sync --frozen --no-dev --no-editable --no-cache --package ax3l-mcp-snakelab

FROM runtime AS mcp-snakelab
COPY --from=mcp-snakelab-venv /app/.venv /app/.venv
USER ax3l
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=5 \
  CMD ["python", "-c", "import ax3l.app.snakelab.tools.server"]
CMD ["python", "-m", "ax3l.app.snakelab.tools"]
