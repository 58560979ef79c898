# syntax=docker/dockerfile:1
# One image for the control plane (`firstlume serve`), the migrations (`firstlume migrate`) and
# the executors (`firstlume executor`), with the engine binaries in it. The Helm chart runs it.
#
#   docker build -t REGISTRY/firstlume:0.1.0 .
#
# Engines are downloaded from their release pages and checked against a pinned SHA256: change a
# version together with its checksum (from the release's SHA256SUMS file), e.g.
#   --build-arg TERRAFORM_VERSION=1.11.4 --build-arg TERRAFORM_SHA256=<sha256 of the linux zip>
# OpenTofu and Terragrunt are left out unless their version and checksum are given.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS engines
# Set by BuildKit for the target platform; the classic builder leaves it empty: amd64.
ARG TARGETARCH
ARG TERRAFORM_VERSION=1.11.4
# terraform_1.11.4_linux_amd64.zip; building for another architecture needs its own checksum.
ARG TERRAFORM_SHA256=1ce994251c00281d6845f0f268637ba50c0005657eb3cf096b92f753b42ef4dc
ARG TOFU_VERSION=""
ARG TOFU_SHA256=""
ARG TERRAGRUNT_VERSION=""
ARG TERRAGRUNT_SHA256=""
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl unzip \
 && rm -rf /var/lib/apt/lists/*
RUN set -eu; \
    arch="${TARGETARCH:-amd64}"; \
    mkdir -p /opt/engines/bin; \
    test -n "${TERRAFORM_SHA256}" || { echo "TERRAFORM_SHA256 is required" >&2; exit 1; }; \
    curl -fsSLo /tmp/terraform.zip \
      "https://releases.hashicorp.com/terraform/${TERRAFORM_VERSION}/terraform_${TERRAFORM_VERSION}_linux_${arch}.zip"; \
    echo "${TERRAFORM_SHA256}  /tmp/terraform.zip" | sha256sum -c -; \
    unzip -q -d /opt/engines/bin /tmp/terraform.zip terraform; \
    rm /tmp/terraform.zip; \
    /opt/engines/bin/terraform version
RUN set -eu; \
    arch="${TARGETARCH:-amd64}"; \
    if [ -n "${TOFU_VERSION}" ]; then \
      test -n "${TOFU_SHA256}" || { echo "TOFU_SHA256 is required with TOFU_VERSION" >&2; exit 1; }; \
      curl -fsSLo /tmp/tofu.zip \
        "https://github.com/opentofu/opentofu/releases/download/v${TOFU_VERSION}/tofu_${TOFU_VERSION}_linux_${arch}.zip"; \
      echo "${TOFU_SHA256}  /tmp/tofu.zip" | sha256sum -c -; \
      unzip -q -d /opt/engines/bin /tmp/tofu.zip tofu; \
      rm /tmp/tofu.zip; \
    fi; \
    if [ -n "${TERRAGRUNT_VERSION}" ]; then \
      test -n "${TERRAGRUNT_SHA256}" || { echo "TERRAGRUNT_SHA256 is required with TERRAGRUNT_VERSION" >&2; exit 1; }; \
      curl -fsSLo /opt/engines/bin/terragrunt \
        "https://github.com/gruntwork-io/terragrunt/releases/download/v${TERRAGRUNT_VERSION}/terragrunt_linux_${arch}"; \
      echo "${TERRAGRUNT_SHA256}  /opt/engines/bin/terragrunt" | sha256sum -c -; \
      chmod 0755 /opt/engines/bin/terragrunt; \
    fi

# The web UI: its operations are checked against schema.graphql, then Vite writes the assets
# into backend/firstlume/static, which the Python package ships.
FROM node:20-slim AS ui
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY schema.graphql /src/schema.graphql
COPY frontend/ ./
RUN npm run build

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/firstlume
COPY pyproject.toml /src/
COPY backend /src/backend
COPY --from=ui /src/backend/firstlume/static /src/backend/firstlume/static
RUN /opt/firstlume/bin/pip install /src

FROM ${PYTHON_IMAGE}
ARG UID=10001
# git and ssh: Terraform fetches git:: module sources with them.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git openssh-client \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid "${UID}" firstlume \
 && useradd --system --uid "${UID}" --gid "${UID}" --home-dir /home/firstlume --create-home \
      --shell /usr/sbin/nologin firstlume
COPY --from=engines /opt/engines/bin/ /usr/local/bin/
COPY --from=build /opt/firstlume /opt/firstlume
# The root filesystem is read-only in the cluster: state goes to /tmp, an emptyDir there.
ENV PATH=/opt/firstlume/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    FIRSTLUME_DATA_DIR=/tmp/firstlume \
    CHECKPOINT_DISABLE=1
# Numeric, so Kubernetes can check runAsNonRoot; the chart's runAsUser matches it.
USER ${UID}:${UID}
WORKDIR /home/firstlume
EXPOSE 8000
ENTRYPOINT ["firstlume"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
